"""Reason strings for verdicts: they are read in the journal, so they are sentences
that name workloads, concurrency levels and effects ("wins single_stream (+7.4%) but
loses parallel at every C (1-250; -57.8% to -16.2%)")."""

from __future__ import annotations

from collections.abc import Sequence

from campaign.domain.models import ConfigChange
from campaign.domain.records import LevelComparison, Winner
from campaign.playbook.schema import VerdictSpec

#: records hold finite numbers: an unbounded interval edge is stored as this.
UNBOUNDED_PCT = 1e6


def effect_range(deltas: list[float]) -> str:
    low, high = f"{min(deltas):+.1f}%", f"{max(deltas):+.1f}%"
    return low if low == high else f"{low} to {high}"


def levels_phrase(workload: str, all_levels: list[LevelComparison], chosen: list[LevelComparison]) -> str:
    """'parallel at every C (1-250; -56.2% to -16.3%)', 'single_stream (+7.4%)'..."""
    eff = effect_range([c.delta_pct for c in chosen])
    if len(all_levels) == 1:
        return f"{workload} ({eff})"
    cs = [c.concurrency for c in chosen]
    if len(chosen) == len(all_levels):
        return f"{workload} at every C ({cs[0]}-{cs[-1]}; {eff})"
    return f"{workload} at C={','.join(map(str, cs))} ({eff})"


def side_phrase(groups: dict[str, list[LevelComparison]], winner: Winner) -> str:
    parts = []
    for w, cs in groups.items():
        chosen = [c for c in cs if c.winner == winner]
        if chosen:
            parts.append(levels_phrase(w, cs, chosen))
    return " and ".join(parts)


def latency_note(groups: dict[str, list[LevelComparison]], spec: VerdictSpec) -> str:
    lim = spec.latency_limit
    if lim is None:
        return ""
    notes = []
    for side, flag in (("candidate", "candidate_meets_limit"), ("baseline", "baseline_meets_limit")):
        where = []
        for w, cs in groups.items():
            cc = [c.concurrency for c in cs if getattr(c, flag) and c.baseline_meets_limit != c.candidate_meets_limit]
            if cc:
                where.append(f"{w} C={','.join(map(str, cc))}")
        if where:
            notes.append(
                f"{lim.metric} {lim.stat} <= {lim.max_ms:g} ms is met only by the {side} at {', '.join(where)}"
            )
    return "; " + "; ".join(notes) if notes else ""


def setting_phrase(ch: ConfigChange) -> str:
    if ch.change == "added":
        return f"{ch.key} (set to {ch.after})"
    if ch.change == "removed":
        return f"{ch.key} (unset, was {ch.before})"
    return f"{ch.key} ({ch.before} -> {ch.after})"


def _v(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def confound_reason(changes: Sequence[ConfigChange]) -> str:
    """One clause per kind of confounder: undeclared changes (requested, then reported by
    the servers), then declared flags a server ignored or overrode."""
    clauses = []
    for reported, lead in ((False, ""), (True, "the servers report ")):
        group = [c for c in changes if c.reported == reported and c.change in ("added", "removed", "changed")]
        if group:
            names = ", ".join(setting_phrase(c) for c in group)
            verb, obj = ("differs", "it") if len(group) == 1 else ("differ", "them")
            clauses.append(f"{lead}{names} {verb} from the baseline but the hypothesis does not declare {obj}")
    for c in changes:
        if c.change == "ignored":
            clauses.append(
                f"the server ignored {c.key}: asked for {_v(c.requested)}, it reports {_v(c.after)} as on the baseline"
            )
        elif c.change == "overridden":
            clauses.append(f"the server overrode {c.key}: asked for {_v(c.requested)}, it reports {_v(c.after)}")
    return "confounded: " + "; ".join(clauses)


def noise_reason(comparisons: Sequence[LevelComparison], spec: VerdictSpec) -> str:
    width = max(max(abs(c.ci_low_pct), abs(c.ci_high_pct)) for c in comparisons)
    if width >= UNBOUNDED_PCT or any(c.ci_low_pct <= -100 for c in comparisons):
        return "within noise (undetermined: too few repeats to estimate the noise)"
    return (
        f"within noise (±{width:.1f}%): no level differs by the {spec.min_effect_pct:g}% minimum effect "
        f"at {spec.confidence:.0%} confidence"
    )
