"""Stacked wins: once the queue is empty, re-validate the adopted wins together
against the ORIGINAL baseline; when the stack falls short of the product of its
parts, bisect (campaign.verdict.stacking) to find the interacting pair.

Each subset to measure becomes an ordinary hypothesis (flags of those wins on top of
the original config) measured interleaved against the original config, so the same
launch / sweep / verdict path and the same record serve it.
"""

from __future__ import annotations

from campaign.domain.config import diff, merge
from campaign.domain.models import EffectiveConfig
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.ports.store import VerdictHistory
from campaign.verdict.stacking import (
    BisectionState,
    expected_stack_delta,
    start_bisection,
)

PREFIX = "stack-check-"


def original_config(pb: Playbook) -> EffectiveConfig:
    return EffectiveConfig(flags=dict(pb.baseline.flags), env=dict(pb.baseline.env))


def adopted_wins(store: VerdictHistory, cid: str) -> list[tuple[str, float, HypothesisSpec]]:
    """(name, headline delta %, spec) of every adopted win, in adoption order."""
    out = []
    for e in store.list_experiments(cid, role="candidate"):
        if e.adopted and not e.hypothesis.startswith(PREFIX):
            v = store.get_verdict(e.id)
            h = store.get_hypothesis(cid, e.hypothesis)
            if h is None:  # every experiment is started from a recorded hypothesis
                raise LookupError(f"experiment {e.id}: its hypothesis {e.hypothesis!r} is not in the record")
            out.append((e.hypothesis, float(v.headline_delta_pct or 0.0) if v else 0.0, h.spec))
    return out


def subset_hypothesis(
    pb: Playbook, wins: list[tuple[str, float, HypothesisSpec]], subset: list[str], k: int
) -> HypothesisSpec:
    """The subset's wins stacked on the original config, as one hypothesis."""
    base = original_config(pb)
    cfg = base
    for name, _d, spec in wins:
        if name in subset:
            cfg = merge(cfg, spec.flags, spec.env, spec.unset_flags)
    changes = diff(base, cfg)
    flags = {c.key: c.after for c in changes if c.kind == "flag" and c.change != "removed"}
    env = {c.key: str(c.after) for c in changes if c.kind == "env" and c.change != "removed"}
    unset = [c.key for c in changes if c.kind == "flag" and c.change == "removed"]
    patches = [
        p
        for name, _d, spec in wins
        if name in subset
        for p in (spec.stack_patches or ([spec.patch] if spec.patch else []))
    ]
    what = "all adopted wins" if len(subset) == len(wins) else "wins " + ", ".join(subset)
    return HypothesisSpec(
        name=f"{PREFIX}{k}",
        rationale=f"stack validation: {what} together against the original baseline (do they add up?)",
        flags=flags,
        env=env,
        unset_flags=unset,
        stack_patches=patches,
        declares=[c.key for c in changes],
    )


def start(wins: list[tuple[str, float, HypothesisSpec]], noise_pct: float) -> BisectionState:
    return start_bisection([w[0] for w in wins], [w[1] for w in wins], noise_pct)


def summary(state: BisectionState, wins: list[tuple[str, float, HypothesisSpec]]) -> str:
    expected = expected_stack_delta([w[1] for w in wins])
    res = state.result
    if res is None:
        return ""
    head = f"stack of {len(wins)} adopted wins (expected {expected:+.1f}% from the product of their parts)"
    if res.pair:
        return f"{head}: falls short; interacting pair {res.pair[0]} + {res.pair[1]} ({res.explanation})"
    if res.group:
        return f"{head}: falls short; interaction within {', '.join(res.group)} ({res.explanation})"
    return f"{head}: adds up ({res.explanation})"
