"""The planner contract: where the next hypothesis comes from.

The campaign graph's `propose` node builds a `PlannerContext` from the store and
the playbook and asks a `Planner`.  A planner never runs anything: it returns a
validated `HypothesisSpec` (or none), and everything it refused on the way, so
the record shows what the model tried.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from campaign.domain.models import FailureClass
from campaign.domain.records import CampaignView, ExperimentView
from campaign.planner.schemas import LlmCallRecord, Proposal, Rejection
from campaign.playbook.schema import HypothesisSpec, Playbook


class PlannerUnavailable(Exception):
    """The LLM endpoint cannot be used (unreachable, timeout, wrong key, rate limited).

    `str(err)` is one line, safe to print: it never holds the API key.  `calls`
    holds the failed call records so the cost of trying is still recorded.
    """

    def __init__(self, message: str, calls: list[LlmCallRecord] | None = None) -> None:
        super().__init__(message)
        self.calls = list(calls or [])


class PlannerContext(BaseModel):
    """Everything a planner may look at.  The graph fills it; planners only read it.

    `queue` is the playbook's hypotheses still to run, in order (reopened dead ends
    first when the graph wants them first).  `tried` holds the names already run.
    `reopened` holds dead-end hypothesis names whose revisit condition now holds
    (a changed fingerprint component); `view.dead_ends[*].reopened` counts too.
    """

    playbook: Playbook
    view: CampaignView
    tried: list[str] = Field(default_factory=list)
    queue: list[HypothesisSpec] = Field(default_factory=list)
    reopened: list[str] = Field(default_factory=list)
    #: the `SourceTreeFactory` port that checks proposed patches (None: patches are refused)
    source: Any = Field(default=None, exclude=True)

    def reopened_names(self) -> set[str]:
        return set(self.reopened) | {d.hypothesis for d in self.view.dead_ends if d.reopened}

    def known_names(self) -> set[str]:
        """Names that a new hypothesis may not take: tried, queued, in the playbook."""
        return (
            set(self.tried)
            | {h.name for h in self.queue}
            | {h.name for h in self.playbook.hypotheses}
            | {e.hypothesis for e in self.view.experiments}
        )


class ProposalOutcome(BaseModel):
    """The answer of `Planner.propose`.

    `hypothesis` is None when the planner has nothing (queue empty) or gave up
    (`exhausted`: too many rejections, or its proposal budget is spent); the graph
    then falls back to the queue or stops.  `needs_approval` is True when the
    hypothesis carries a patch: the review gate must show it before it is applied.
    """

    hypothesis: HypothesisSpec | None = None
    source: Literal["playbook", "llm"] = "playbook"
    proposal: Proposal | None = None  # the model's full answer (expected effect, revisit_of)
    rejections: list[Rejection] = Field(default_factory=list)
    calls: list[LlmCallRecord] = Field(default_factory=list)
    exhausted: bool = False
    needs_approval: bool = False
    note: str = ""  # one line for the journal/CLI: why nothing was proposed


class AnalysisOutcome(BaseModel):
    """A short model-written paragraph about one verdict.  It never changes a verdict."""

    text: str | None = None
    model_written: bool = True
    calls: list[LlmCallRecord] = Field(default_factory=list)


class TriageOutcome(BaseModel):
    failure_class: FailureClass | None = None
    calls: list[LlmCallRecord] = Field(default_factory=list)


@runtime_checkable
class Planner(Protocol):
    """A hypothesis source.  `kind` is "queue" or "llm"."""

    kind: str

    def propose(self, ctx: PlannerContext) -> ProposalOutcome: ...

    def analyze(self, ctx: PlannerContext, experiment: ExperimentView) -> AnalysisOutcome: ...

    def triage(self, log_lines: list[str]) -> TriageOutcome: ...
