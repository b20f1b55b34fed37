"""The store port: what the loop, the journal and the verdict read and write.

A written contract, as Optuna's `BaseStorage` is for its studies: each consumer types
its store against the narrowest Protocol here, so the SQLite `campaign.store.Store`
is one implementation among possible others (another database, an in-memory one in a
test), and mypy checks it keeps the contract (`campaign.cli.wiring`).

What every implementation promises, whatever it stores in:
- writes are idempotent upserts: a graph node resumed after an interrupt may repeat a
  write and nothing is recorded twice (the `bool` returned: whether it wrote);
- finished experiments and their verdicts are immutable: the same content again is a
  no-op, different content raises `campaign.store.ImmutableRecordError`;
- an unknown campaign raises `campaign.domain.errors.UserError` naming it;
- reads see one consistent state (a reader never blocks the writer).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Protocol

from pydantic import JsonValue

from campaign.domain.models import EffectiveConfig, Failure, Fingerprint, LevelResult
from campaign.domain.records import CampaignStatus, CampaignView, LevelSamples, PlannerCall, Verdict
from campaign.playbook.schema import HypothesisSpec
from campaign.ports.records import (
    CampaignRecord,
    EventRecord,
    ExperimentArtifactKind,
    ExperimentRecord,
    ExperimentRole,
    ExperimentStatus,
    HypothesisRecord,
    HypothesisSource,
    HypothesisStatus,
    LaunchArtifact,
    LaunchArtifactKind,
    LaunchTime,
    ReviewDecision,
    ReviewRecord,
    RunRecord,
    RunSide,
    Tally,
)

__all__ = ["JournalReader", "LoopStore", "VerdictHistory"]

#: (repeat, workload, concurrency, value) of one metric at one level
LevelValue = tuple[int, str, int, float]


class VerdictHistory(Protocol):
    """What the verdict package reads: the campaign's experiments, their verdicts and
    the hypotheses they tested (the stack check re-validates the adopted wins)."""

    def list_experiments(
        self,
        campaign_id: str,
        *,
        role: ExperimentRole | None = None,
        hypothesis: str | None = None,
        status: ExperimentStatus | None = None,
    ) -> list[ExperimentRecord]:
        """In start order."""
        ...

    def get_verdict(self, experiment_id: str) -> Verdict | None: ...

    def get_hypothesis(self, campaign_id: str, name: str) -> HypothesisRecord | None: ...


class JournalReader(Protocol):
    """What the journal renders from: the campaign, one consistent view of it, and
    what changed since the last render (so an update re-renders only that)."""

    def get_campaign(self, campaign_id: str) -> CampaignRecord:
        """The campaign; `UserError` naming the id when unknown."""
        ...

    def view(
        self, campaign_id: str, *, detail: set[str] | None = None, window: Collection[str] | None = None
    ) -> CampaignView:
        """Everything the journal renders, from one read.  `detail`: only these
        experiments carry their measured rows; `window`: only these candidates appear."""
        ...

    def journal_changes(self, campaign_id: str, since: int | None) -> tuple[list[str], set[str] | None, int]:
        """(candidate ids in start order, experiments changed after change number
        `since` or None for "take everything as changed", the latest change number)."""
        ...


class LoopStore(VerdictHistory, JournalReader, Protocol):
    """What the graph's nodes read and write (`campaign.loop`), the journal's and the
    verdict's reads included, since the loop renders and judges through them."""

    # ------------------------------------------------------------ campaign
    def update_campaign(
        self,
        campaign_id: str,
        *,
        status: CampaignStatus | None = None,
        halt_reason: str | None = ...,
        baseline_experiment_id: str | None = ...,
        overrides: dict[str, JsonValue] | None = None,
        node: str | None = None,
        time_scale: float | None = None,
    ) -> CampaignRecord:
        """Set the given fields; `halt_reason` / `baseline_experiment_id` left out stay,
        None clears them; `overrides` replaces the whole dict."""
        ...

    def record_fingerprint(self, campaign_id: str, fingerprint: Fingerprint) -> str:
        """Its content-hash id; a change from the latest is recorded as an event."""
        ...

    def latest_fingerprint(self, campaign_id: str) -> Fingerprint | None: ...

    def get_fingerprint(self, campaign_id: str, fingerprint_id_: str) -> Fingerprint | None: ...

    # ---------------------------------------------------------- hypotheses
    def upsert_hypothesis(
        self,
        campaign_id: str,
        spec: HypothesisSpec,
        *,
        source: HypothesisSource = "playbook",
        position: int | None = None,
    ) -> HypothesisRecord:
        """Queue `spec` (appended unless `position`); an existing one keeps its status."""
        ...

    def list_hypotheses(self, campaign_id: str, status: HypothesisStatus | None = None) -> list[HypothesisRecord]:
        """In queue order."""
        ...

    def next_queued_hypothesis(self, campaign_id: str) -> HypothesisRecord | None: ...

    def set_hypothesis_status(
        self, campaign_id: str, name: str, status: HypothesisStatus, *, rejection_reason: str | None = None
    ) -> HypothesisRecord: ...

    def reopen_hypothesis(self, campaign_id: str, name: str) -> bool:
        """Queue a finished or rejected one again; False when already queued or running."""
        ...

    # --------------------------------------------------------- experiments
    def start_experiment(
        self,
        campaign_id: str,
        hypothesis: str,
        *,
        config: EffectiveConfig,
        role: ExperimentRole = "candidate",
        node: str = "",
        command: str = "",
        attempt: int | None = None,
        fingerprint_id: str | None = None,
        baseline_ref: str | None = None,
        patch_sha: str | None = None,
        reason: str = "",
    ) -> ExperimentRecord:
        """Idempotent: with `attempt`, that experiment (returned unchanged when it
        exists); without, the running one of this hypothesis or a new attempt."""
        ...

    def annotate_experiment(
        self,
        experiment_id: str,
        *,
        command: str | None = None,
        patch_sha: str | None = None,
        fingerprint_id: str | None = None,
        config: EffectiveConfig | None = None,
    ) -> ExperimentRecord:
        """Fill in what a running experiment learned after its start."""
        ...

    def finish_experiment(
        self,
        experiment_id: str,
        status: ExperimentStatus = "finished",
        failure: Failure | None = None,
        node_seconds: float = 0.0,
        queue_seconds: float = 0.0,
    ) -> ExperimentRecord:
        """Final from here on (immutable)."""
        ...

    def get_experiment(self, experiment_id: str) -> ExperimentRecord: ...

    def set_adopted(self, experiment_id: str, adopted: bool = True) -> None: ...

    def record_verdict(self, experiment_id: str, verdict: Verdict) -> bool: ...

    # -------------------------------------------------------- measurements
    def record_side(
        self,
        experiment_id: str,
        side: RunSide,
        repeat: int,
        levels: list[tuple[str, LevelResult, str]],
        *,
        node: str = "",
    ) -> bool:
        """Every level of one launch, (workload, result, work key), all or nothing."""
        ...

    def has_side(self, experiment_id: str, side: RunSide, repeat: int) -> bool: ...

    def runs_for(self, experiment_id: str, side: RunSide | None = None) -> list[RunRecord]: ...

    def side_values(
        self, experiment_ids: list[str], metric: str, side: RunSide = "baseline", work: Mapping[str, str] | None = None
    ) -> dict[str, list[LevelValue]]:
        """One metric of one side of many experiments, per experiment, in one read (the
        noise model's, before every decision: it must stay cheap at any size)."""
        ...

    def level_samples(self, experiment_id: str) -> list[LevelSamples]:
        """Per level, the candidate's repeats and the baseline's they compare with."""
        ...

    def noise_history(
        self, campaign_id: str, node: str, fingerprint_id: str | None, *, limit: int, exclude: str | None = None
    ) -> list[tuple[str, str | None]]:
        """(id, baseline_ref) of the latest `limit` live experiments on `node` in this
        environment, in start order."""
        ...

    def loop_tally(self, campaign_id: str) -> Tally:
        """The kept counts (budget, streaks, node seconds), read in constant time."""
        ...

    # ---------------------------------------------------- launch artifacts
    def record_launch_artifact(
        self, experiment_id: str, kind: LaunchArtifactKind, content: str, *, side: RunSide, repeat: int
    ) -> bool: ...

    def launch_artifacts(self, experiment_id: str, kind: LaunchArtifactKind) -> list[LaunchArtifact]:
        """Every launch's `kind`, in (repeat, side) order."""
        ...

    def launch_artifact(
        self, experiment_id: str, kind: LaunchArtifactKind, *, side: RunSide, repeat: int
    ) -> str | None: ...

    def record_launch_time(self, experiment_id: str, time: LaunchTime) -> None: ...

    def launch_times(self, experiment_id: str) -> list[LaunchTime]: ...

    # ------------------------------------------------ experiment artifacts
    def record_artifact(self, experiment_id: str, kind: ExperimentArtifactKind, content: str, *, seq: int = 0) -> bool:
        """`seq`: 0, or the round (`round_reason`) or repeat (`drift`) it is about."""
        ...

    def get_artifact(self, experiment_id: str, kind: ExperimentArtifactKind, seq: int = 0) -> str | None: ...

    # ---------------------------------------------------- reviews and log
    def request_review(self, campaign_id: str, reason: str, *, key: str | None = None) -> int:
        """The review gate's number; the same `key` again returns the same gate."""
        ...

    def decide_review(
        self,
        campaign_id: str,
        seq: int,
        decision: ReviewDecision,
        *,
        note: str = "",
        added: Iterable[HypothesisSpec] = (),
        overrides: dict[str, JsonValue] | None = None,
    ) -> ReviewRecord: ...

    def record_llm_call(
        self,
        campaign_id: str,
        *,
        purpose: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_ms: float,
        prompt_hash: str,
        output: dict[str, JsonValue] | list[JsonValue] | str | None = None,
        rejection: str | None = None,
        attempt: int = 0,
    ) -> bool: ...

    def planner_calls(self, campaign_id: str) -> list[PlannerCall]: ...

    def add_event(
        self, campaign_id: str, kind: str, message: str, *, key: str | None = None, ts: float | None = None
    ) -> bool:
        """A timeline entry, keyed by (kind, key or message)."""
        ...

    def events(self, campaign_id: str, kind: str | None = None) -> list[EventRecord]: ...

    def refresh_show_cache(self, campaign_id: str) -> None:
        """Keep `campaign show --json` a stored read (after each verdict)."""
        ...
