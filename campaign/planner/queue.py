"""The default planner: the playbook's own hypotheses, in the order the graph gives."""

from __future__ import annotations

from campaign.domain.records import ExperimentView
from campaign.planner.base import (
    AnalysisOutcome,
    PlannerContext,
    ProposalOutcome,
    TriageOutcome,
)


class QueuePlanner:
    """Returns the first queued hypothesis not yet tried; no model, no analysis."""

    kind = "queue"

    def propose(self, ctx: PlannerContext) -> ProposalOutcome:
        tried = set(ctx.tried)
        reopened = ctx.reopened_names()
        for h in ctx.queue:
            if h.name not in tried or h.name in reopened:
                return ProposalOutcome(hypothesis=h, source="playbook")
        return ProposalOutcome(hypothesis=None, source="playbook", exhausted=True, note="playbook queue is empty")

    def analyze(self, ctx: PlannerContext, experiment: ExperimentView) -> AnalysisOutcome:
        return AnalysisOutcome(text=None)

    def triage(self, log_lines: list[str]) -> TriageOutcome:
        return TriageOutcome(failure_class=None)


def propose_or_queue(planner: object, ctx: PlannerContext) -> ProposalOutcome:
    """Ask `planner`; when it gives up (exhausted), take the queue's next hypothesis,
    keeping the planner's calls and rejections for the record.  `PlannerUnavailable`
    is not caught: the CLI shows it as one line."""
    outcome: ProposalOutcome = planner.propose(ctx)  # type: ignore[attr-defined]
    if outcome.hypothesis is not None or not outcome.exhausted or isinstance(planner, QueuePlanner):
        return outcome
    fallback = QueuePlanner().propose(ctx)
    return fallback.model_copy(
        update={
            "rejections": outcome.rejections,
            "calls": outcome.calls,
            "note": "; ".join(n for n in (outcome.note, fallback.note if fallback.hypothesis is None else "") if n),
        }
    )
