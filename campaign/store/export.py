"""Every level measurement of a campaign as flat rows: what `campaign export` writes.

Why flat: a spreadsheet, pandas or a notebook reads one row per (experiment, side,
launch, workload, C) with one column per figure.  The columns are the recorded
`LevelResult` itself, flattened (`ttft_ms.p99` -> `ttft_ms_p99`), so a field the load
generator adds is exported without touching this module, and a row converts back to
the very result the store holds (`level_result`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from sqlmodel import Session, col, select

from campaign.domain.models import LevelResult
from campaign.store.convert import run_records
from campaign.store.models import ExperimentRow, RunSideRow
from campaign.store.ops import require_campaign

__all__ = ["ID_COLUMNS", "LevelMeasurement", "columns", "level_measurements", "level_result"]

#: what identifies a measurement, ahead of its figures
ID_COLUMNS = (
    "campaign_id",
    "experiment_id",
    "hypothesis",
    "attempt",
    "role",
    "side",
    "launch",
    "workload",
    "work",
    "node",
    "recorded_at",
)


class LevelMeasurement(BaseModel):
    """One level of one launch (round) of one side of one experiment."""

    campaign_id: str
    experiment_id: str
    hypothesis: str
    attempt: int
    role: str  # the experiment's: "baseline" (a baseline measurement) or "candidate"
    side: str  # the launch's: an experiment measures its candidate and, interleaved, the baseline
    launch: int  # the round: 0, 1, ... per side
    workload: str
    work: str  # the work key: prompts, lengths and protocol (`campaign.domain.work`)
    node: str
    recorded_at: float
    result: LevelResult

    def flat(self) -> dict[str, Any]:
        """The identity columns, then the result's figures, one column each."""
        out: dict[str, Any] = {k: getattr(self, k) for k in ID_COLUMNS}
        for key, value in self.result.model_dump(mode="json").items():
            if isinstance(value, dict):
                out.update({f"{key}_{sub}": v for sub, v in value.items()})
            elif isinstance(value, list):
                out[key] = json.dumps(value)
            else:
                out[key] = value
        return out


def columns() -> list[str]:
    """Every column, in order (also the CSV header of a campaign with no measurement)."""
    sample = LevelMeasurement(
        campaign_id="",
        experiment_id="",
        hypothesis="",
        attempt=0,
        role="",
        side="",
        launch=0,
        workload="",
        work="",
        node="",
        recorded_at=0.0,
        result=LevelResult(concurrency=1, requests=0),
    )
    return list(sample.flat())


def level_result(row: dict[str, Any]) -> LevelResult:
    """The result a flat row (CSV strings or JSON values) was exported from."""
    data: dict[str, Any] = {}
    for key, field in LevelResult.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            data[key] = {sub: row[f"{key}_{sub}"] for sub in field.annotation.model_fields}
        elif key in row:
            value = row[key]
            data[key] = json.loads(value) if key == "error_samples" and isinstance(value, str) else value
    return LevelResult.model_validate(data)


def level_measurements(s: Session, campaign_id: str) -> list[LevelMeasurement]:
    """Every recorded level of the campaign, by experiment start, side, launch, then as recorded."""
    require_campaign(s, campaign_id)
    exps = {
        e.id: e
        for e in s.exec(
            select(ExperimentRow)
            .where(ExperimentRow.campaign_id == campaign_id)
            .order_by(col(ExperimentRow.started_at), col(ExperimentRow.id))
        )
    }
    order = {exp_id: i for i, exp_id in enumerate(exps)}
    sides = s.exec(select(RunSideRow).where(col(RunSideRow.experiment_id).in_(list(exps)))).all()
    out: list[LevelMeasurement] = []
    for row in sorted(sides, key=lambda r: (order[r.experiment_id], r.side != "candidate", r.repeat)):
        exp = exps[row.experiment_id]
        out.extend(
            LevelMeasurement(
                campaign_id=campaign_id,
                experiment_id=exp.id,
                hypothesis=exp.hypothesis,
                attempt=exp.attempt,
                role=exp.role,
                side=r.side,
                launch=r.repeat,
                workload=r.workload,
                work=r.work,
                node=r.node,
                recorded_at=r.recorded_at,
                result=r.result,
            )
            for r in run_records(row)
        )
    return out
