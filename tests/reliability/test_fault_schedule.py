"""The simulated node's fault schedule (tools.simnode.faults): parsing and the pure decision."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.simnode.faults import Action, FaultInjector, FaultPlan, FaultSpecError, decide, parse_fault_spec


def test_parse_every_fault_and_empty_parts() -> None:
    plan = parse_fault_spec(" crash_after:3, hang_after:1,,http500_rate:0.25,unreachable_after:0 ")
    assert plan == FaultPlan(crash_after=3, hang_after=1, http500_rate=0.25, unreachable_after=0)
    assert plan.armed and not parse_fault_spec("").armed


@pytest.mark.parametrize(
    "bad", ["crash_after", "crash_after:x", "crash_after:-1", "http500_rate:1.5", "explode:1", "hang_after:2.5"]
)
def test_bad_spec_names_the_part(bad: str) -> None:
    with pytest.raises(FaultSpecError) as exc:
        parse_fault_spec(bad)
    assert "SIMNODE_FAULT" in str(exc.value) and bad.split(":")[0] in str(exc.value)


def test_crash_after_serves_n_then_crashes() -> None:
    plan = FaultPlan(crash_after=3)
    assert [decide(plan, n) for n in range(1, 6)] == [Action.serve] * 3 + [Action.crash] * 2


def test_precedence_crash_over_unreachable_over_hang() -> None:
    plan = FaultPlan(crash_after=5, hang_after=1, unreachable_after=3, http500_rate=1.0)
    assert [decide(plan, n) for n in range(1, 8)] == [
        Action.http500,
        Action.hang,
        Action.hang,
        Action.unreachable,
        Action.unreachable,
        Action.crash,
        Action.crash,
    ]


@pytest.mark.parametrize("rate", [0.1, 0.25, 0.5, 1.0])
def test_http500_rate_is_exact_and_even(rate: float) -> None:
    plan = FaultPlan(http500_rate=rate)
    fails = [decide(plan, n) is Action.http500 for n in range(1, 201)]
    assert sum(fails) == round(200 * rate)
    gaps = [j - i for i, j in zip([k for k, f in enumerate(fails) if f], [k for k, f in enumerate(fails) if f][1:])]
    assert not gaps or max(gaps) - min(gaps) <= 1  # spread, not bunched


def test_injector_from_env_and_one_shot_marker(tmp_path: Path) -> None:
    assert FaultInjector.from_env({}) is None
    marker = tmp_path / "m" / "fired"
    env = {"SIMNODE_FAULT": "crash_after:1", "SIMNODE_FAULT_ONCE": str(marker)}
    first = FaultInjector.from_env(env)
    assert first is not None
    assert [first.on_request() for _ in range(3)] == [Action.serve, Action.crash, Action.crash]
    assert marker.exists()  # written when it fired: this launch keeps failing, the next one is clean
    second = FaultInjector.from_env(env)
    assert second is not None and [second.on_request() for _ in range(3)] == [Action.serve] * 3
