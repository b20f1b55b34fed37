"""The review policy's counters, derived from the record instead of carried in the state.

A counter kept only in the graph state drifts when a crash loses a node's update (a
no-win streak of 1 after two ideas without a win skipped a review gate).  The record
holds every fact the counters summarize: each recorded experiment's verdict and when
it finished, when a review gate was approved and when the environment changed (both
start the streaks again), so `record` recounts them on every call.
"""

from __future__ import annotations

from typing import Any

from campaign.store.view import ENVIRONMENT_EVENT

__all__ = ["experiments_recorded", "streaks_from_store"]


def experiments_recorded(store: Any, campaign_id: str) -> int:
    """Candidate experiments that went through `record` (the budget's count)."""
    return sum(e.status in ("finished", "failed") for e in store.list_experiments(campaign_id, role="candidate"))


def streaks_from_store(store: Any, campaign_id: str) -> tuple[int, int]:
    """(no-win streak, dead-end streak): ideas recorded since the last win, and dead ends
    among them, counting only since the last approved review gate or environment change."""
    resets = [r.decided_at or 0.0 for r in store.list_reviews(campaign_id)
              if r.key.startswith("review#") and r.decision == "approve"]
    resets += [e.ts for e in store.events(campaign_id, ENVIRONMENT_EVENT)]
    since = max(resets, default=0.0)
    done = sorted((e for e in store.list_experiments(campaign_id, role="candidate")
                   if e.status in ("finished", "failed") and (e.finished_at or 0.0) > since),
                  key=lambda e: e.finished_at or 0.0)
    no_win = dead_end = 0
    for exp in done:
        verdict = store.get_verdict(exp.id)
        if verdict is None:
            continue
        if verdict.kind == "win":
            no_win = dead_end = 0
        else:
            no_win += 1
            dead_end += int(verdict.kind == "dead_end")
    return no_win, dead_end
