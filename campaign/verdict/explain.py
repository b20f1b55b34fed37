"""The verdict in plain words: which level decided it, its change and interval, and the
bar it had to clear.  One convention for every reader (journal, pages, plots, `show`,
`show --json`): the change is always the candidate's against the baseline ("+9.4%
faster", "-55.5% slower"), an interval is its two true ends in the same unit ("[+1.8%,
+17.6%]", never a half-width: the interval is symmetric on the log scale, not in %), and
the bar is the playbook's minimum effect as `campaign.verdict.rule` applies it.

Pure functions of the recorded verdict (its `levels` survive in an outline view, which
has no measured rows): the deciding level is chosen by the same rule that made the
verdict, so the figure a scoreboard shows is the one that decided.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from campaign.domain.models import INFRASTRUCTURE_FAILURES
from campaign.domain.records import ExperimentView, LevelComparison, Verdict
from campaign.verdict.reasons import UNBOUNDED_PCT
from campaign.verdict.rule import loss_bound

__all__ = [
    "Decided",
    "bar_needed",
    "bar_of",
    "change",
    "compared_levels",
    "decided",
    "decided_line",
    "deciding_levels",
    "interval",
    "lowest_bound",
    "marker",
    "next_step",
    "pct",
]


def pct(x: float) -> str:
    return f"{x:+.1f}%"


def change(delta_pct: float) -> str:
    """'+9.4% faster' / '-55.5% slower': the candidate against the baseline."""
    return f"{pct(delta_pct)} {'faster' if delta_pct >= 0 else 'slower'}"


def interval(low_pct: float, high_pct: float) -> str:
    """'[+1.8%, +17.6%]'; an end the repeats could not bound reads 'unbounded'."""
    low = "unbounded" if low_pct <= -100 else pct(low_pct)
    high = "unbounded" if high_pct >= UNBOUNDED_PCT else pct(high_pct)
    return f"[{low}, {high}]"


def bar_needed(winner: str, m: float) -> str:
    """What the level rule asks of a level's interval for this outcome."""
    if winner == "candidate":
        return f"whole interval above {pct(m)}"
    if winner == "baseline":
        return f"whole interval below {pct(-m)}"
    return f"whole interval above {pct(m)} (faster) or below {pct(-m)} (slower)"


def _where(c: LevelComparison) -> str:
    return f"{c.workload} C={c.concurrency}"


def _best_win(levels: Sequence[LevelComparison]) -> LevelComparison:
    return max((c for c in levels if c.winner == "candidate"), key=lambda c: (c.ci_low_pct, c.delta_pct))


def _worst_loss(levels: Sequence[LevelComparison]) -> LevelComparison:
    return min((c for c in levels if c.winner == "baseline"), key=lambda c: (c.ci_high_pct, c.delta_pct))


def compared_levels(exp: ExperimentView) -> list[LevelComparison]:
    """The verdict's level comparisons, as the view's rows carry them (an outline view
    has no rows: the verdict's own)."""
    rows = [r.comparison for r in exp.rows if r.comparison is not None]
    return rows or (list(exp.verdict.levels) if exp.verdict is not None else [])


def bar_of(v: Verdict | None, playbook_min_effect_pct: float) -> float:
    """The minimum effect the verdict applied: its own record, else the playbook's."""
    return v.min_effect_pct if v is not None and v.min_effect_pct is not None else playbook_min_effect_pct


def lowest_bound(levels: Sequence[LevelComparison]) -> LevelComparison | None:
    """The level closest to a loss beyond the bar: the lowest one-sided no-loss bound."""
    checked = [c for c in levels if not c.limit_decided]
    return min(checked, key=loss_bound) if checked else None


def deciding_levels(v: Verdict, levels: Sequence[LevelComparison] | None = None) -> list[LevelComparison]:
    """The level(s) that decided the verdict, most telling first: a WIN's strongest win
    (highest lower end); a loss's clearest loss; a mixed regime's win and loss; a WIN
    held back by a possible loss, the win and that level; no decision, the largest
    change.  A crash decided nothing by measurement: none.  `levels`: the verdict's own
    unless given (a view's rows carry the same comparisons)."""
    levels = v.levels if levels is None else levels
    if not levels or v.failure_class is not None:
        return []
    wins = any(c.winner == "candidate" for c in levels)
    losses = any(c.winner == "baseline" for c in levels)
    if wins and losses:
        return [_worst_loss(levels), _best_win(levels)]
    if losses:
        return [_worst_loss(levels)]
    if wins:
        low = lowest_bound(levels)
        best = _best_win(levels)
        return [best, low] if v.kind == "inconclusive" and low is not None and low is not best else [best]
    return [max(levels, key=lambda c: abs(c.delta_pct))]


class Decided(BaseModel):
    """The deciding evidence, as `show --json` gives it and the journal prints it."""

    workload: str
    concurrency: int
    candidate: float
    baseline: float
    delta_pct: float
    low_pct: float
    high_pct: float
    confidence: float | None  # the level's own confidence (Holm's or Bonferroni's level)
    min_effect_pct: float
    needed: str  # "whole interval above +2.0%"
    text: str  # "+9.4% faster [+1.8%, +17.6%] at parallel C=70"


def decided(c: LevelComparison, m: float) -> Decided:
    return Decided(
        workload=c.workload,
        concurrency=c.concurrency,
        candidate=c.candidate_mean,
        baseline=c.baseline_mean,
        delta_pct=c.delta_pct,
        low_pct=c.ci_low_pct,
        high_pct=c.ci_high_pct,
        confidence=c.level_confidence,
        min_effect_pct=m,
        needed=bar_needed(c.winner, m),
        text=f"{change(c.delta_pct)} {interval(c.ci_low_pct, c.ci_high_pct)} at {_where(c)}",
    )


def decided_line(v: Verdict, m: float, compared: Sequence[LevelComparison] | None = None) -> str:
    """What decided, in one line: 'WIN: +9.4% faster [+1.8%, +17.6%] at parallel C=70,
    above the +2.0% bar; no level lost more than 2%'."""
    compared = v.levels if compared is None else compared
    levels = deciding_levels(v, compared)
    mark = {"win": "WIN", "dead_end": "DEAD END", "inconclusive": "INCONCLUSIVE"}[v.kind]
    if (
        v.failure_class is not None
        or v.confounded_by
        or (v.correctness is not None and not v.correctness.passed)
        or not levels
    ):
        cls = f" ({v.failure_class.value})" if v.failure_class is not None else ""
        return f"{mark}{cls}: {v.reason}"
    first = decided(levels[0], m)
    worst = lowest_bound(compared)
    no_loss = (
        f"no level lost more than {m:g}% (lowest bound {pct(loss_bound(worst))} at {_where(worst)})"
        if worst is not None
        else f"no level lost more than {m:g}%"
    )
    w = levels[0].winner
    if v.kind == "win":
        return f"WIN: {first.text}, above the {pct(m)} bar (needed: {first.needed}); {no_loss}"
    if w == "baseline" and len(levels) > 1:
        win = decided(levels[1], m)
        return (
            f"DEAD END: {first.text}, below the {pct(-m)} bar, although {win.text} "
            f"(needed for a WIN: no level below {pct(-m)})"
        )
    if w == "baseline":
        return f"DEAD END: {first.text}, below the {pct(-m)} bar (needed: {first.needed})"
    if w == "candidate" and len(levels) > 1:
        low = levels[1]
        return (
            f"INCONCLUSIVE: {first.text}, above the {pct(m)} bar, but a loss beyond {m:g}% is not ruled out "
            f"at {_where(low)} (bound {pct(loss_bound(low))}; needed: above {pct(-m)})"
        )
    return f"INCONCLUSIVE: no level cleared the bar; the largest change is {first.text} (needed: {first.needed})"


def marker(exp: ExperimentView) -> str:
    """WIN / DEAD END (class) / INCONCLUSIVE (reason): plain text, no emoji."""
    v = exp.verdict
    if v is None:
        if exp.failure is not None:
            return f"FAILED ({exp.failure.failure_class.value})"
        return exp.status.upper()
    if v.kind == "win":
        return "WIN (adopted)" if exp.adopted else "WIN"
    if v.kind == "dead_end":
        cls = v.failure_class or (exp.failure.failure_class if exp.failure else None)
        if cls is not None:
            return f"DEAD END ({cls.value})"
        return (
            "DEAD END (mixed regime)"
            if "candidate" in v.regimes.values() or "mixed" in v.regimes.values()
            else "DEAD END (slower)"
        )
    if v.confounded_by:
        return "INCONCLUSIVE (confounded: " + ", ".join(c.key for c in v.confounded_by) + ")"
    reason = v.reason.split(";")[0].split(". ")[0].strip()
    return f"INCONCLUSIVE ({reason[:48] + '...' if len(reason) > 48 else reason or 'noise'})"


def next_step(exp: ExperimentView, reopened: bool = False) -> str:
    """What happens next because of this verdict, and for a WIN that was not adopted, why
    (adoption is the playbook's `adopt_if_win`, `campaign.loop.nodes.experiment`)."""
    v = exp.verdict
    if v is None:
        return "running" if exp.status == "running" else "no verdict recorded"
    if v.kind == "win":
        if exp.adopted:
            return "adopted: every later experiment's baseline includes it"
        if not exp.adopt_if_win:
            return (
                "not adopted: the playbook does not set adopt_if_win for this hypothesis, so later experiments "
                "do not build on it (set adopt_if_win: true to stack it, or deploy it by hand)"
            )
        return "not adopted yet: the campaign stopped before it recorded the adoption"
    if v.kind == "dead_end":
        if reopened:
            return (
                "re-opened: its revisit condition ("
                + " or ".join(v.revisit_on)
                + " changes) holds now, so it is tested again"
            )
        if not v.revisit_on:
            return "dead end: not retried (the idea itself lost)"
        env = exp.environment.components() if exp.environment else {}
        ran = ", ".join(f"{k} {env[k]}" for k in v.revisit_on if env.get(k))
        return (
            "dead end: retried only when "
            + " or ".join(v.revisit_on)
            + " changes"
            + (f" (it ran on {ran})" if ran else "")
        )
    if v.failure_class in INFRASTRUCTURE_FAILURES:
        return "not adopted: the node failed, not the idea; it is retried"
    if v.confounded_by:
        return "not adopted: declare the other change in the hypothesis or remove it, then run it again"
    return "not adopted: the measurements cannot tell it from the baseline at the playbook's bar"
