from __future__ import annotations

from campaign.domain.models import FailureClass, Fingerprint
from campaign.domain.records import DeadEnd
from campaign.verdict.revisit import (
    FAILURE_COMPONENTS,
    changed_components,
    fills_in,
    reopenable,
    reopenable_since_recorded,
    revisit_components,
)


def test_failure_classes_map_to_components_then_declared():
    assert revisit_components(FailureClass.jit_error, []) == ["cuda", "arch", "engine_version"]
    assert revisit_components(FailureClass.unsupported_arch, ["torch"]) == ["cuda", "arch", "engine_version", "torch"]
    assert revisit_components(FailureClass.cuda_graph_incompatible, []) == ["cuda", "nccl"]
    assert revisit_components(FailureClass.nccl_error, ["nccl", "driver"]) == ["cuda", "nccl", "driver"]
    assert revisit_components(FailureClass.oom, []) == ["engine_version", "gpu"]
    assert revisit_components(FailureClass.assertion, ["gpu"]) == ["engine_version", "gpu"]
    assert revisit_components(None, ["cuda", "cuda", ""]) == ["cuda"]
    assert revisit_components(FailureClass.port_in_use, []) == []


def test_every_failure_class_has_a_rule():
    assert set(FAILURE_COMPONENTS) == set(FailureClass)


def _fp(**kw) -> Fingerprint:
    base = dict(
        gpu="RTX PRO 6000",
        gpu_count=8,
        arch="sm120",
        driver="570.1",
        cuda="12.8",
        engine="sglang",
        engine_version="0.5.0",
        extra={"nccl": "2.26"},
    )
    base.update(kw)
    return Fingerprint(**base)


def test_changed_components_ignores_unknown_values():
    old, new = _fp(), _fp(cuda="13.0", extra={"nccl": "2.27", "torch": "2.8"}, host="node-2")
    assert changed_components(old, new) == ["cuda", "nccl"]  # host and torch were unknown before
    assert changed_components(old, _fp(driver="")) == []
    assert changed_components(old, old) == []


def _dead(name: str, revisit: list[str], *, reopened: bool = False, env: dict[str, str] | None = None) -> DeadEnd:
    return DeadEnd(
        hypothesis=name,
        experiment_id=f"e-{name}",
        reason="x",
        revisit_on=revisit,
        reopened=reopened,
        environment=env or {},
    )


def test_reopenable_picks_dead_ends_whose_condition_changed():
    ends = [
        _dead("flashinfer-allreduce-fusion", ["cuda", "arch", "engine_version"]),
        _dead("nccl-tree", ["cuda", "nccl"], reopened=True),
        _dead("ep-a2a", ["engine_version", "gpu"]),
        _dead("custom-allreduce", []),
    ]
    assert [d.hypothesis for d in reopenable(ends, ["cuda"])] == ["flashinfer-allreduce-fusion"]
    assert [d.hypothesis for d in reopenable(ends, ["engine_version"])] == ["flashinfer-allreduce-fusion", "ep-a2a"]
    assert reopenable(ends, []) == []


def test_reopenable_since_recorded_compares_with_each_dead_ends_environment():
    recorded_on_13 = _dead("eagle3", ["cuda"], env=_fp(cuda="13.0").components())
    recorded_on_12 = _dead("fusion", ["cuda"], env=_fp().components())
    now = _fp(cuda="13.0")
    assert [d.hypothesis for d in reopenable_since_recorded([recorded_on_13, recorded_on_12], now)] == ["fusion"]


def test_a_component_read_for_the_first_time_fills_in_and_nothing_else_does():
    old = Fingerprint(gpu="H200", cuda="12.8", host="n1")
    assert fills_in(old, old.model_copy(update={"engine": "vllm", "engine_version": "0.11.0"}))
    known = old.model_copy(update={"engine_version": "0.11.0"})
    assert not fills_in(known, known.model_copy(update={"engine_version": "0.12.0"}))  # an upgrade
    assert not fills_in(known, old)  # known -> unknown: not the same fingerprint, better known
    assert not fills_in(old, old.model_copy(update={"host": "n2", "engine_version": "0.11.0"}))
