"""`campaign compare A B`: what each of A and B names, read from the store.

`ID` names a campaign's current baseline (the configuration it would deploy today);
`ID:EXPERIMENT` one experiment of it, by its id (`ID.smaller-cuda-graph.1` or the part
after `ID.`) or its hypothesis (the latest attempt that measured something; `baseline`
is the latest baseline measurement).  A candidate experiment is read on its candidate
side, a baseline measurement on its baseline side: the configuration each one ran.
"""

from __future__ import annotations

from typing import Any

from campaign.domain.errors import UserError
from campaign.store.records import CampaignRecord, ExperimentRecord
from campaign.verdict.side_by_side import MeasuredSide

__all__ = ["measured_side"]


def _fix(campaign_id: str) -> str:
    return f"(fix: `campaign show {campaign_id}` lists its experiments; write ID or ID:EXPERIMENT)"


def _experiment(store: Any, campaign: CampaignRecord, name: str) -> ExperimentRecord:
    exps: list[ExperimentRecord] = store.list_experiments(campaign.id)
    by_id = {e.id: e for e in exps}
    for key in (name, f"{campaign.id}.{name}"):
        if key in by_id:
            return by_id[key]
    same = [e for e in exps if e.hypothesis == name and store.runs_for(e.id, _side_of(e))]
    if not same:
        raise UserError(f"{campaign.id}:{name}: no measured experiment of that name {_fix(campaign.id)}")
    return same[-1]


def _side_of(exp: ExperimentRecord) -> str:
    return "baseline" if exp.role == "baseline" else "candidate"


def measured_side(store: Any, ref: str) -> tuple[MeasuredSide, CampaignRecord]:
    """`ref` ("ID" or "ID:EXPERIMENT") -> every launch of the configuration it names,
    and its campaign (`store`: a `campaign.store.Store`)."""
    campaign_id, _, name = ref.partition(":")
    if not campaign_id:
        raise UserError(
            f"{ref!r}: no campaign id (fix: write ID or ID:EXPERIMENT, e.g. {ref.lstrip(':')} "
            "after the id `campaign status` lists)"
        )
    campaign: CampaignRecord = store.get_campaign(campaign_id)
    if name:
        exp = _experiment(store, campaign, name)
    elif campaign.baseline_experiment_id:
        exp = store.get_experiment(campaign.baseline_experiment_id)
    else:
        raise UserError(f"{campaign_id}: no baseline measured yet {_fix(campaign_id)}")
    side = MeasuredSide(
        label=ref,
        experiment_id=exp.id,
        side=_side_of(exp),
        campaign_id=campaign.id,
        node=exp.node,
        environment=exp.fingerprint_id,
    )
    for r in store.runs_for(exp.id, side.side):  # by workload, C, repeat: launch order within a level
        side.levels.setdefault((r.workload, r.concurrency), []).append(r.result)
        side.work[r.workload] = r.work
    return side, campaign
