"""Store methods for experiments and what they produce: runs, verdicts, artifacts.

A mixin of `campaign.store.Store`.  An experiment is `running` until finished or
failed, then immutable; one left running by a dead process is marked `stale` and
re-run as a new attempt (its runs stay recorded but never feed a verdict).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Mapping
from functools import partial
from typing import get_args

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from campaign.domain.models import EffectiveConfig, Failure, LevelResult
from campaign.domain.records import LevelSamples, Verdict
from campaign.store import tally
from campaign.store.convert import canonical, experiment_record, run_order, run_records, verdict_detail, verdict_of
from campaign.store.db import driver_connection, read_session, write_session
from campaign.store.memo import ParseMemo
from campaign.store.models import ArtifactRow, ExperimentRow, RunSideRow, VerdictRow
from campaign.store.ops import ImmutableRecordError, require_campaign, require_experiment
from campaign.store.pack import level_values, pack_levels, pack_text, unpack_levels, unpack_text
from campaign.store.records import ArtifactKind, ExperimentRecord, ExperimentRole, ExperimentStatus, RunRecord, RunSide

_TERMINAL = ("finished", "failed", "stale")


def _check_choice(value: str, choices: tuple[str, ...], what: str) -> None:
    if value not in choices:
        raise ValueError(f"{what} must be one of {', '.join(choices)}, not {value!r}")


def _tagged(repeat: int, blob: bytes, metric: str, work: Mapping[str, str] | None) -> list[tuple[int, str, int, float]]:
    return [(repeat, w, c, v) for w, c, v in level_values(blob, metric, work)]


class ExperimentsMixin:
    _engine: Engine
    _memo: ParseMemo

    # -------------------------------------------------------------- experiments
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
        """Idempotent start.  With `attempt`, (campaign, hypothesis, attempt) names the
        experiment and an existing one is returned unchanged.  Without, a `running`
        experiment of this hypothesis is returned, else attempt = last attempt + 1.
        Id: "{campaign_id}.{hypothesis}.{attempt}".  `command` must be redacted."""
        _check_choice(role, get_args(ExperimentRole), "role")
        with write_session(self._engine) as s:
            require_campaign(s, campaign_id)
            mine = select(ExperimentRow).where(
                ExperimentRow.campaign_id == campaign_id, ExperimentRow.hypothesis == hypothesis
            )
            if attempt is None:
                running = s.exec(mine.where(ExperimentRow.status == "running")).first()
                if running is not None:
                    return experiment_record(running)
                last = s.exec(
                    select(func.max(ExperimentRow.attempt)).where(
                        ExperimentRow.campaign_id == campaign_id, ExperimentRow.hypothesis == hypothesis
                    )
                ).one()
                attempt = (last or 0) + 1
            elif (existing := s.exec(mine.where(ExperimentRow.attempt == attempt)).first()) is not None:
                return experiment_record(existing)
            row = ExperimentRow(
                id=f"{campaign_id}.{hypothesis}.{attempt}", campaign_id=campaign_id, hypothesis=hypothesis,
                attempt=attempt, role=role, node=node, config_json=canonical(config), command=command,
                fingerprint_id=fingerprint_id, baseline_ref=baseline_ref, patch_sha=patch_sha, reason=reason,
                started_at=time.time(),
            )  # fmt: skip
            s.add(row)
            return experiment_record(row)

    def annotate_experiment(
        self,
        experiment_id: str,
        *,
        command: str | None = None,
        patch_sha: str | None = None,
        fingerprint_id: str | None = None,
        config: EffectiveConfig | None = None,
    ) -> ExperimentRecord:
        """Fill in what is known only after start (launch command, patch commit)."""
        with write_session(self._engine) as s:
            row = require_experiment(s, experiment_id)
            updates = {"command": command, "patch_sha": patch_sha, "fingerprint_id": fingerprint_id,
                       "config_json": canonical(config) if config is not None else None}  # fmt: skip
            changed = {k: v for k, v in updates.items() if v is not None and getattr(row, k) != v}
            if changed and row.status in _TERMINAL:
                raise ImmutableRecordError(
                    f"experiment {experiment_id} is {row.status}: cannot change {', '.join(changed)}"
                )
            for key, value in changed.items():
                setattr(row, key, value)
            s.add(row)
            return experiment_record(row)

    def finish_experiment(
        self,
        experiment_id: str,
        status: ExperimentStatus = "finished",
        failure: Failure | None = None,
        node_seconds: float = 0.0,
        queue_seconds: float = 0.0,
    ) -> ExperimentRecord:
        """Make the experiment final.  Again with the same status, failure and
        seconds: no-op (a resumed node); with anything different: ImmutableRecordError."""
        _check_choice(status, ("finished", "failed"), "status")
        failure_json = canonical(failure) if failure is not None else None
        with write_session(self._engine) as s:
            row = require_experiment(s, experiment_id)
            if row.status in _TERMINAL:
                same = (row.status, row.failure_json, row.node_seconds, row.queue_seconds)
                if same == (status, failure_json, node_seconds, queue_seconds):
                    return experiment_record(row)
                raise ImmutableRecordError(
                    f"experiment {experiment_id} is already {row.status}; refusing to record it as {status} with other content"
                )
            row.status, row.failure_json, row.node_seconds = status, failure_json, node_seconds
            row.queue_seconds = queue_seconds
            row.finished_at = time.time()
            s.add(row)
            s.flush()
            tally.on_finish(driver_connection(s), experiment_id)  # the loop's counts, in this transaction
            return experiment_record(row)

    def set_adopted(self, experiment_id: str, adopted: bool = True) -> None:
        """Mark a win as adopted into the baseline (a campaign decision, not a measurement)."""
        with write_session(self._engine) as s:
            row = require_experiment(s, experiment_id)
            row.adopted = adopted
            s.add(row)

    def get_experiment(self, experiment_id: str) -> ExperimentRecord:
        with read_session(self._engine) as s:
            return experiment_record(require_experiment(s, experiment_id))

    def list_experiments(
        self,
        campaign_id: str,
        *,
        role: ExperimentRole | None = None,
        hypothesis: str | None = None,
        status: ExperimentStatus | None = None,
    ) -> list[ExperimentRecord]:
        """In start order."""
        with read_session(self._engine) as s:
            q = select(ExperimentRow).where(ExperimentRow.campaign_id == campaign_id)
            for column, value in (
                (ExperimentRow.role, role),
                (ExperimentRow.hypothesis, hypothesis),
                (ExperimentRow.status, status),
            ):
                if value is not None:
                    q = q.where(column == value)
            return [
                experiment_record(r) for r in s.exec(q.order_by(col(ExperimentRow.started_at), col(ExperimentRow.id)))
            ]

    def mark_stale_experiments(self, campaign_id: str, keep: tuple[str, ...] | list[str] = ()) -> list[str]:
        """Mark experiments left `running` (by a process that died) as `stale`; returns their ids.
        Call it after taking the run lock, before resuming the graph.  `keep`: experiments the
        resumed graph continues itself (its checkpoint still holds them)."""
        with write_session(self._engine) as s:
            rows = s.exec(
                select(ExperimentRow).where(ExperimentRow.campaign_id == campaign_id, ExperimentRow.status == "running")
            ).all()
            rows = [r for r in rows if r.id not in set(keep)]
            now = time.time()
            for row in rows:
                row.status, row.finished_at = "stale", now
                s.add(row)
            return [r.id for r in rows]

    # --------------------------------------------------------------------- runs
    def record_run(
        self,
        experiment_id: str,
        side: RunSide,
        repeat: int,
        workload: str,
        result: LevelResult,
        *,
        work: str = "",
        node: str = "",
    ) -> bool:
        """One repeat of one level.  Keyed by (experiment, side, repeat, workload,
        result.concurrency): the first write is kept (False on a repeat write)."""
        _check_choice(side, get_args(RunSide), "side")
        metrics = canonical(result)
        with write_session(self._engine) as s:
            exp = require_experiment(s, experiment_id)
            row = s.get(RunSideRow, (experiment_id, side, repeat))
            levels = unpack_levels(row.levels) if row is not None else []
            found = next((r for w, r, _ in levels if w == workload and r.concurrency == result.concurrency), None)
            if found is not None and (canonical(found) == metrics or exp.status == "running"):
                return False
            if exp.status in _TERMINAL:
                raise ImmutableRecordError(f"experiment {experiment_id} is {exp.status}: cannot record a new run")
            levels.append((workload, result, work))
            if row is None:
                row = RunSideRow(
                    experiment_id=experiment_id,
                    side=side,
                    repeat=repeat,
                    levels=pack_levels(levels),
                    node=node,
                    recorded_at=time.time(),
                )
            else:
                row.levels = pack_levels(levels)
            s.add(row)
            return True

    def record_side(
        self,
        experiment_id: str,
        side: RunSide,
        repeat: int,
        levels: list[tuple[str, LevelResult, str]],
        *,
        node: str = "",
    ) -> bool:
        """Every level of one side of one repeat in ONE transaction: a killed controller
        leaves either the whole measurement or none of it.  `levels`: (workload, result,
        work key: `campaign.domain.work`).  False when that side/repeat is already recorded."""
        _check_choice(side, get_args(RunSide), "side")
        with write_session(self._engine) as s:
            exp = require_experiment(s, experiment_id)
            if s.get(RunSideRow, (experiment_id, side, repeat)) is not None:
                return False
            if exp.status in _TERMINAL:
                raise ImmutableRecordError(f"experiment {experiment_id} is {exp.status}: cannot record a new run")
            if levels:
                s.add(
                    RunSideRow(
                        experiment_id=experiment_id,
                        side=side,
                        repeat=repeat,
                        levels=pack_levels(levels),
                        node=node,
                        recorded_at=time.time(),
                    )
                )
            return True

    def has_side(self, experiment_id: str, side: RunSide, repeat: int) -> bool:
        with read_session(self._engine) as s:
            return s.get(RunSideRow, (experiment_id, side, repeat)) is not None

    def runs_for(self, experiment_id: str, side: RunSide | None = None) -> list[RunRecord]:
        """Ordered by workload, concurrency, side, repeat."""
        with read_session(self._engine) as s:
            return self._runs_in(s, experiment_id, side)

    @staticmethod
    def _runs_in(s: Session, experiment_id: str, side: str | None = None) -> list[RunRecord]:
        q = select(RunSideRow).where(RunSideRow.experiment_id == experiment_id)
        if side is not None:
            q = q.where(RunSideRow.side == side)
        return sorted((r for row in s.exec(q) for r in run_records(row)), key=run_order)

    def side_values(
        self, experiment_ids: list[str], metric: str, side: RunSide = "baseline", work: Mapping[str, str] | None = None
    ) -> dict[str, list[tuple[int, str, int, float]]]:
        """(repeat, workload, concurrency, metric) of every level of one side, per
        experiment, in one query and without building level results: the noise model
        reads every launch of the campaign before each decision, so this read must stay
        cheap at 1,000+ experiments.  `work`: only levels of that work key per workload
        (`campaign.domain.work`)."""
        out: dict[str, list[tuple[int, str, int, float]]] = {i: [] for i in experiment_ids}
        if not experiment_ids:
            return out
        q = select(RunSideRow.experiment_id, RunSideRow.repeat, RunSideRow.levels).where(
            col(RunSideRow.experiment_id).in_(experiment_ids), RunSideRow.side == side
        )
        wanted = tuple(sorted(work.items())) if work is not None else None
        with read_session(self._engine) as s:
            for exp_id, repeat, blob in s.exec(q):
                # decoded once per blob (keyed by its length and checksum: a side still being
                # written gains levels): every round of every experiment reads the same history
                key = (exp_id, side, repeat, len(blob), zlib.crc32(blob), metric, wanted)
                out[exp_id].extend(self._memo.side_values.get(key, partial(_tagged, repeat, blob, metric, work)))
        return out

    def level_samples(self, experiment_id: str) -> list[LevelSamples]:
        """The verdict's input, per (workload, concurrency).  Candidate repeats are this
        experiment's; baseline repeats are its own interleaved ones, or, when it has
        none, those of `baseline_ref` (never those of a stale experiment)."""
        with read_session(self._engine) as s:
            exp = require_experiment(s, experiment_id)
            candidate = self._runs_in(s, experiment_id, "candidate")
            baseline = self._runs_in(s, experiment_id, "baseline")
            if not baseline and exp.baseline_ref:
                ref = s.get(ExperimentRow, exp.baseline_ref)
                if ref is not None and ref.status != "stale":
                    baseline = self._runs_in(s, ref.id, "baseline")
        grouped: dict[tuple[str, int], LevelSamples] = {}
        for run in baseline + candidate:
            key = (run.workload, run.concurrency)
            samples = grouped.setdefault(key, LevelSamples(workload=run.workload, concurrency=run.concurrency))
            (samples.baseline if run.side == "baseline" else samples.candidate).append(run.result)
        return [grouped[k] for k in sorted(grouped)]

    # ----------------------------------------------------------------- verdicts
    def record_verdict(self, experiment_id: str, verdict: Verdict) -> bool:
        """One verdict per experiment, final: same again -> False, different -> ImmutableRecordError."""
        detail = canonical(verdict)
        with write_session(self._engine) as s:
            exp = require_experiment(s, experiment_id)
            row = s.get(VerdictRow, experiment_id)
            if row is not None:
                if verdict_detail(row) == detail:
                    return False
                raise ImmutableRecordError(f"experiment {experiment_id} already has a {row.kind} verdict")
            if exp.status == "stale":
                raise ImmutableRecordError(f"experiment {experiment_id} is stale: its runs cannot carry a verdict")
            s.add(
                VerdictRow(
                    experiment_id=experiment_id,
                    kind=verdict.kind,
                    reason=verdict.reason,
                    failure_class=verdict.failure_class.value if verdict.failure_class else None,
                    detail_json="" if (z := pack_text(detail)) else detail,
                    detail_z=z,
                    recorded_at=time.time(),
                )  # fmt: skip
            )
            if exp.status in _TERMINAL:  # the loop decides before it finishes; anyone else: counted again
                s.flush()
                tally.on_late_verdict(driver_connection(s), exp.campaign_id)
            return True

    def get_verdict(self, experiment_id: str) -> Verdict | None:
        with read_session(self._engine) as s:
            row = s.get(VerdictRow, experiment_id)
            return verdict_of(verdict_detail(row)) if row else None

    # ---------------------------------------------------------------- artifacts
    def record_artifact(self, experiment_id: str, kind: ArtifactKind, content: str, *, seq: int = 0) -> bool:
        """Evidence keyed by (experiment, kind, seq).  Same content again -> False; other
        content replaces it while the experiment runs, and is refused once it is final."""
        _check_choice(kind, get_args(ArtifactKind), "kind")
        with write_session(self._engine) as s:
            exp = require_experiment(s, experiment_id)
            row = s.get(ArtifactRow, (experiment_id, kind, seq))
            packed = pack_text(content)
            if row is not None:
                if unpack_text(row.content, row.content_z) == content:
                    return False
                if exp.status in _TERMINAL:
                    raise ImmutableRecordError(
                        f"experiment {experiment_id} is {exp.status}: artifact {kind}#{seq} is final"
                    )
                row.content, row.content_z = ("" if packed else content), packed
            else:
                row = ArtifactRow(
                    experiment_id=experiment_id,
                    kind=kind,
                    seq=seq,
                    content="" if packed else content,
                    content_z=packed,
                    created_at=time.time(),
                )
            s.add(row)
            return True

    def get_artifact(self, experiment_id: str, kind: ArtifactKind, seq: int = 0) -> str | None:
        with read_session(self._engine) as s:
            row = s.get(ArtifactRow, (experiment_id, kind, seq))
            return unpack_text(row.content, row.content_z) if row else None

    def list_artifacts(self, experiment_id: str) -> list[tuple[str, int, str]]:
        """(kind, seq, content) in kind, seq order."""
        with read_session(self._engine) as s:
            q = select(ArtifactRow).where(ArtifactRow.experiment_id == experiment_id)
            return [
                (r.kind, r.seq, unpack_text(r.content, r.content_z))
                for r in s.exec(q.order_by(col(ArtifactRow.kind), col(ArtifactRow.seq)))
            ]
