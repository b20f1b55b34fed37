"""The graph state: small on purpose.

Ids, the hypothesis in hand, counters and the halt reason live here; every
measurement lives in the store, written before the next decision is taken, so a
resumed graph re-reads facts instead of trusting a stale copy.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Current(TypedDict, total=False):
    hypothesis: str
    experiment_id: str
    attempt: int
    rounds: int  # measurement rounds finished (one round = baseline side + candidate side)
    side: str  # next side to measure: "baseline" | "candidate"
    failed: bool  # launch/load failure seen: go straight to the verdict
    infra_retries: int
    reference_config: dict[str, Any] | None  # compare with this config instead of the baseline
    candidate_sha: str | None  # the commit each side runs from (server.source set)
    baseline_sha: str | None


class CampaignState(TypedDict, total=False):
    campaign_id: str
    baseline_id: str | None  # experiment id of the current baseline measurement
    need_baseline: str | None  # why the baseline must be (re)measured, None when it is current
    env_changed: list[str]
    fingerprint_id: (
        str | None
    )  # the environment every experiment started now runs in  # fingerprint components changed at the last check
    current: Current | None
    no_win_streak: int
    dead_end_streak: int
    experiments_done: int
    baseline_config: dict[str, Any] | None  # EffectiveConfig of the current baseline
    baseline_attempt: int
    reviews_done: int
    halt: dict[str, Any] | None  # {"kind": "review"|"finish"|"fail", "reason": str}
    finished: bool
    stack: dict[str, Any] | None  # stacked-wins check: bisection state, subset under test
    baseline_patches: list[str]  # patch files of adopted wins: the baseline runs with them applied
    node_index: int  # which of deps.nodes runs this branch (parallel fan-out); 0 otherwise


def current_of(state: CampaignState) -> Current:
    """The hypothesis in hand; the routers only enter the experiment nodes with one."""
    cur = state.get("current")
    if cur is None:
        raise RuntimeError("graph: an experiment node ran without a current hypothesis")
    return cur


__all__ = ["CampaignState", "Current", "current_of"]
