"""The rule table on real crash logs (tests/tools/server/triage_corpus): no log sent
the wrong way, at least 90% classified right; the LLM is tried on the unknowns only
and counted apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.triage_corpus import (
    CORPUS,
    HOLDOUT,
    CorpusError,
    llm_triage,
    load_corpus,
    main,
    read_log,
    score,
    table,
)
from campaign.domain.models import FailureClass
from tests.fake_openai import FakeOpenAI, answer

SOURCE = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+")


def test_corpus_is_real_logs_with_their_source() -> None:
    logs = load_corpus()
    assert len(logs) >= 60
    assert {log.engine for log in logs} == {"vllm", "sglang"}
    assert sum(log.engine == "sglang" for log in logs) >= 15
    for log in logs:
        assert SOURCE.match(log.source), f"{log.name}: source must be the issue/PR URL, got {log.source!r}"
        assert log.name.startswith(f"{log.engine}-"), log.name
        assert 1 <= len(log.lines) <= 300, f"{log.name}: {len(log.lines)} lines (trim to the lines that matter)"
        assert log.expected != FailureClass.exited or log.name.split("-")[1] in {"config", "model", "tokenizer"}
    # every category of the issue is represented
    classes = {log.expected for log in logs}
    assert {
        FailureClass.oom,
        FailureClass.unsupported_arch,
        FailureClass.jit_error,
        FailureClass.nccl_error,
        FailureClass.cuda_graph_incompatible,
        FailureClass.kernel_fault,
        FailureClass.assertion,
        FailureClass.bad_flag,
        FailureClass.port_in_use,
        FailureClass.engine_dead,
        FailureClass.hang,
        FailureClass.exited,
    } <= classes


def test_rules_classify_the_corpus_without_a_wrong_class() -> None:
    results = score(load_corpus())
    wrong = [f"{r.name}: expected {r.expected}, got {r.got}" for r in results if r.outcome == "wrong"]
    assert wrong == []
    right = sum(r.outcome == "right" for r in results) / len(results)
    unknown = [r.name for r in results if r.outcome == "unknown"]
    assert right >= 0.90, f"right {right:.1%}; unknown: {unknown}"


def test_table_and_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "| **all** |" in out and "wrong 0.0%" in out
    training, holdout = out.split("## holdout")
    assert "## training corpus" in training and "wrong 0.0%" in holdout


def test_holdout_is_apart_from_the_corpus_and_scored_apart() -> None:
    """Logs never used to write a rule: none shares an issue with the training corpus;
    goal >= 90% right and none wrong."""
    held, trained = load_corpus(HOLDOUT), load_corpus(CORPUS)
    assert len(held) >= 20
    assert not {log.source for log in held} & {log.source for log in trained}
    for log in held:
        assert SOURCE.match(log.source), f"{log.name}: source must be the issue/PR URL, got {log.source!r}"
    results = score(held)
    assert [r.name for r in results if r.outcome == "wrong"] == []
    assert sum(r.outcome == "right" for r in results) / len(results) >= 0.90


def _write(tmp: Path, name: str, header: str, body: str) -> Path:
    path = tmp / name
    path.write_text(header + body, encoding="utf-8")
    return path


def test_a_wrong_class_fails_the_bench(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(
        tmp_path,
        "vllm-x.log",
        "# source: https://github.com/vllm-project/vllm/issues/1\n# engine: vllm\n# class: nccl_error\n",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
    )
    assert main(["--corpus", str(tmp_path), "--list"]) == 1
    assert "wrong   vllm-x.log: expected nccl_error, got oom" in capsys.readouterr().out


def test_a_bad_header_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(
        tmp_path,
        "vllm-y.log",
        "# source: https://github.com/vllm-project/vllm/issues/2\n# engine: vllm\n# class: crashed\n",
        "boom\n",
    )
    assert main(["--corpus", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "vllm-y.log: class 'crashed' is not a FailureClass" in err
    with pytest.raises(CorpusError, match="header lacks engine"):
        read_log(_write(tmp_path, "z.log", "# source: https://github.com/a/b/issues/3\n# class: oom\n", "x\n"))


def test_header_lines_inside_the_log_stay_log_lines() -> None:
    log = read_log(CORPUS / "vllm-kv-max-seq-len-larger-than-cache.log")
    assert any(line.startswith("# GPU blocks:") for line in log.lines)


def test_llm_is_asked_about_unknowns_only_and_counted_apart(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "vllm-known.log",
        "# source: https://github.com/vllm-project/vllm/issues/4\n# engine: vllm\n# class: oom\n",
        "torch.OutOfMemoryError: CUDA out of memory.\n",
    )
    _write(
        tmp_path,
        "sglang-odd.log",
        "# source: https://github.com/sgl-project/sglang/issues/5\n# engine: sglang\n# class: hang\n",
        "[2025-01-01 00:00:00] decode out of sync for 900 s, nothing scheduled\n",
    )
    with FakeOpenAI() as server:
        server.script(answer({"failure_class": "hang"}))
        results = score(load_corpus(tmp_path), llm_triage(server.url, "fake-model"))
        asked = server.chat_requests()
    assert len(asked) == 1 and "decode out of sync" in asked[0].prompt_text()
    by_name = {r.name: r for r in results}
    assert by_name["sglang-odd.log"].outcome == "unknown" and by_name["sglang-odd.log"].llm == "hang"
    assert by_name["vllm-known.log"].outcome == "right" and by_name["vllm-known.log"].llm is None
    rendered = table(results)
    assert "| llm right | llm wrong |" in rendered and "| hang | 1 | 0 | 0 | 1 | 1 | 0 |" in rendered
