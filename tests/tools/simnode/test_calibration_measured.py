"""Measured calibration: the real node under a real load sweep (tools.loadgen.sweep), time-scaled.

The node measures on its own clock (tools/simnode/engine.py, test_node_clock.py), so a busy
host does not move these figures and the test needs no quiet CPU; what remains between them
and the noise-free ground truth is the sweep's own shape (ramp-up, the real-time gaps
between requests), a few percent; the per-launch offset is off here (`_argv`)."""

from __future__ import annotations

import asyncio

import pytest

from campaign.domain.models import WorkloadSpec
from tests.tools.simnode.test_perfmodel import BASE128, BASE512, CONC, EAGLE, SWEEP_BASE, SWEEP_EAGLE
from tools.loadgen.sweep import run_sweep

pytestmark = pytest.mark.slow


def _argv(flags: dict) -> list[str]:
    """The node's flags, with no per-launch offset: these tests check the performance model
    through a real sweep.  With the default fresh 1.5% offset per launch, eagle3 at C=5
    measured 196-202 tok/s in five launches (target 183.2, limit 205.2) and 206.6 once in a
    full suite run; without it, 198.9-199.0 in three.  The offsets have their own tests
    (test_launch_noise.py)."""
    out: list[str] = ["--launch-offset-pct", "0"]
    for k, v in flags.items():
        out += [f"--{k}"] if v is True else [f"--{k}", str(v)]
    return out


def _sweep(node, workload: WorkloadSpec):
    return asyncio.run(run_sweep(node.url, workload, request_timeout_s=120))


@pytest.mark.parametrize(
    "flags,cuda,target",
    [
        (BASE512, "12.8", 82.0),
        (BASE128, "12.8", 89.5),
        (EAGLE, "12.8", 54.1),
        (EAGLE, "13.0", 96.1),
    ],
    ids=["baseline-512", "graph-128", "eagle3-cuda12.8", "eagle3-cuda13"],
)
def test_single_stream_measured(launch, flags, cuda, target):
    node = launch(*_argv(flags), cuda=cuda, time_scale=10.0)
    assert node.wait_healthy()
    res = _sweep(node, WorkloadSpec(name="single", concurrency=[1], prompts="fixed", requests_per_level=6))
    got = res.levels[0].output_tokens_per_s
    assert res.levels[0].errors == 0
    assert got == pytest.approx(target, rel=0.10), f"{got:.1f} vs {target}"


@pytest.mark.parametrize("flags,targets", [(BASE128, SWEEP_BASE), (EAGLE, SWEEP_EAGLE)], ids=["baseline", "eagle3"])
def test_parallel_sweep_measured(launch, flags, targets):
    # At K=50 with 2*C requests, C=1 and C=30 measured 8-17% slow (CI failed on C=1): the
    # wall-clock overhead of each request counted K times.  The node's clock
    # (test_node_clock.py) removed most of that; short levels still sit a few percent off
    # (ramp-up, the real-time gaps between requests), so levels up to C=30, which are cheap,
    # run at K=10 with 4*C requests (-5% at most, measured); the high ones need K=50.
    slow = launch(*_argv(flags), cuda="13.0", time_scale=10.0)
    fast = launch(*_argv(flags), cuda="13.0", time_scale=50.0)
    assert slow.wait_healthy() and fast.wait_healthy()
    for c, target in zip(CONC, targets):
        # a fresh prompt set per level: prompts of earlier levels would hit the radix cache
        # and make prefill cheaper than the calibration (which has no cache hits) assumes
        node, per_level = (slow, "max(8, 4*C)") if c <= 30 else (fast, "2*C")
        res = _sweep(
            node,
            WorkloadSpec(
                name="parallel", concurrency=[c], prompts="diverse", seed=1000 + c, requests_per_level=per_level
            ),
        )
        level = res.level(c)
        assert level is not None and level.errors == 0
        assert level.output_tokens_per_s == pytest.approx(target, rel=0.12), f"C={c}: {level.output_tokens_per_s:.1f}"
