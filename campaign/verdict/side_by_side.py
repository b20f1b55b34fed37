"""Which levels two measured configurations can be compared on (`campaign compare`).

Why a rule: a comparison is only a comparison on the same work.  Two configurations
measured on different workloads, or on a workload of the same name whose prompts,
lengths or measurement protocol differ (its work key, `campaign.domain.work`), would
give a number that means nothing; that is refused in one line, as the loop refuses to
compare a candidate with a baseline measured on other work.  Levels measured by one
side only are left out and named.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from campaign.domain.errors import UserError
from campaign.domain.models import LevelResult
from campaign.domain.records import LevelSamples

__all__ = ["MeasuredSide", "Pairing", "pair_sides"]


class MeasuredSide(BaseModel):
    """Every launch of one configuration: (workload, C) -> results in launch order."""

    label: str  # what the user named: "ID:EXPERIMENT" or "ID"
    experiment_id: str
    side: str  # "candidate" or "baseline": which side of that experiment was read
    campaign_id: str = ""
    node: str = ""
    environment: str | None = None  # its fingerprint id: one node's noise model is per environment
    levels: dict[tuple[str, int], list[LevelResult]] = Field(default_factory=dict)
    work: dict[str, str] = Field(default_factory=dict)  # workload -> its work key


class Pairing(BaseModel):
    """The levels both sides measured (A as the baseline, B as the candidate)."""

    samples: list[LevelSamples]
    only_a: list[tuple[str, int]] = Field(default_factory=list)
    only_b: list[tuple[str, int]] = Field(default_factory=list)

    def same_node(self, a: MeasuredSide, b: MeasuredSide) -> bool:
        """Both of one campaign, node and environment: that node's noise model applies."""
        return bool(a.campaign_id) and (a.campaign_id, a.node, a.environment) == (b.campaign_id, b.node, b.environment)


def pair_sides(a: MeasuredSide, b: MeasuredSide, order: Sequence[str] = ()) -> Pairing:
    """B (candidate) against A (baseline), level by level; UserError when the work differs."""
    for side in (a, b):
        if not side.levels:
            raise UserError(
                f"{side.label}: {side.experiment_id} has no measured level "
                "(fix: name an experiment that measured something: campaign show lists them)"
            )
    wa, wb = _workloads(a), _workloads(b)
    if wa != wb:
        raise UserError(
            f"{a.label} measured workloads {', '.join(sorted(wa))}; {b.label} measured "
            f"{', '.join(sorted(wb))} (fix: compare two experiments that ran the same workloads)"
        )
    for w in sorted(wa):
        ka, kb = a.work.get(w, ""), b.work.get(w, "")
        if ka and kb and ka != kb:
            raise UserError(
                f"workload {w}: {a.label} ran work {ka}, {b.label} ran work {kb} (other prompts, lengths "
                "or protocol) (fix: compare two experiments measured on the same workload definitions)"
            )
    rank = {w: i for i, w in enumerate(order)}
    keys = sorted(set(a.levels) & set(b.levels), key=lambda k: (rank.get(k[0], len(rank)), k[0], k[1]))
    if not keys:
        raise UserError(f"{a.label} and {b.label} share no concurrency level (fix: compare experiments of one sweep)")
    samples = [
        LevelSamples(workload=w, concurrency=c, baseline=a.levels[(w, c)], candidate=b.levels[(w, c)]) for w, c in keys
    ]
    return Pairing(
        samples=samples, only_a=sorted(set(a.levels) - set(b.levels)), only_b=sorted(set(b.levels) - set(a.levels))
    )


def _workloads(side: MeasuredSide) -> set[str]:
    return {w for w, _ in side.levels}
