"""Pure formatting for the journal: markers, figures, tables and per-section contexts.

Everything here returns `Md` (safe Markdown) built from escaped pieces, so the template
only lays sections out.  Numbers are node time; the unit comes from the verdict metric.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

from campaign.domain.records import CampaignView, DeadEnd, ExperimentView
from campaign.journal import mdsafe
from campaign.journal.mdsafe import Md
from campaign.verdict import explain
from campaign.verdict.explain import compared_levels, deciding_levels, interval, marker, pct

UNITS = {"output_tokens_per_s": "tok/s", "requests_per_s": "req/s"}
OVERVIEW_LAST = 40  # the overview's bar chart shows the latest experiments: 1,000 bars read as none


class NotesSource(Protocol):
    def block(self, key: str) -> Md: ...
    def has(self, key: str) -> bool: ...


# ------------------------------------------------------------------ scalars
def fmt_num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def fmt_pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}%"


def fmt_time(ts: float | None) -> str:
    if not ts:
        return "-"
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def fmt_duration(seconds: float) -> str:
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 60}m {s % 60:02d}s" if s >= 60 else f"{s}s"


def fmt_value(v: object) -> str:
    if v is None:
        return "(unset)"
    return str(v).lower() if isinstance(v, bool) else str(v)


def unit_of(metric: str) -> str:
    return UNITS.get(metric, metric)


def _cell(v: Any) -> str:
    return str(v).replace("\n", " ") if isinstance(v, Md) else mdsafe.cell(v)


def table(header: list[Any], rows: list[list[Any]]) -> Md:
    """A GFM table; `Md` cells are trusted, everything else is escaped as a cell."""
    lines = [
        "| " + " | ".join(_cell(h) if h else " " for h in header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return Md("\n".join(lines))


def row_prefix(cells: list[Any]) -> str:
    """A table row without its last cell: cached, then completed with `complete_row`."""
    return "| " + "".join(_cell(v) + " | " for v in cells)


def linked_table(header: list[Any], prefixes: list[str], links: list[str | None]) -> Md:
    """A table from cached row prefixes, each completed with its details link."""
    head = table(header, [])
    return Md("\n".join([head, *(p + (f"[details]({h})" if h else "-") + " |" for p, h in zip(prefixes, links))]))


def config_code(flags: dict[str, Any], env: dict[str, str]) -> Md:
    """A config as the command-line fragment a person would type."""
    parts = [f"{k}={v}" for k, v in env.items()]
    for k, v in flags.items():
        if v is None or v is False:
            continue
        parts.append(f"--{k}" if v is True else f"--{k} {fmt_value(v)}")
    return Md(mdsafe.code(" ".join(parts)) if parts else "(defaults)")


# ------------------------------------------------------------------ plot names (no matplotlib here)
def plot_file_name(view: CampaignView, experiment_id: str) -> str:
    short = experiment_id[len(view.id) + 1 :] if experiment_id.startswith(f"{view.id}/") else experiment_id
    return f"exp-{mdsafe.slug(short)}.png"


def plot_workloads(exp: ExperimentView) -> list[str]:
    """Workloads with more than one measured level: what an experiment's plot shows."""
    names = list(dict.fromkeys(r.workload for r in exp.rows))
    return [w for w in names if sum(1 for r in exp.rows if r.workload == w and r.candidate is not None) > 1]


# ------------------------------------------------------------------ experiments
def metric_of(exp: ExperimentView) -> str:
    return next((r.comparison.metric for r in exp.rows if r.comparison), "output_tokens_per_s")


def headline_of(names: list[str], preferred: str | None) -> str:
    """The headline workload among those measured: the playbook's first workload
    (`CampaignView.headline_workload`), else the first measured."""
    return preferred if preferred in names else names[0]


def bar_of(view: CampaignView, exp: ExperimentView) -> float:
    """The minimum effect the verdict applied: its own record, else the playbook's."""
    return explain.bar_of(exp.verdict, view.min_effect_pct)


def deciding_cells(exp: ExperimentView) -> tuple[str, str]:
    """The scoreboard's figure: the level that decided the verdict (`explain.deciding_levels`),
    '578.3 vs 522.9 tok/s (parallel C=70)', and its change '+10.6% [+3.2%, +18.6%]'."""
    if exp.failure is not None:  # what it measured before it crashed is evidence, not a figure
        return f"crashed ({exp.failure.phase})", "-"
    levels = deciding_levels(exp.verdict, compared_levels(exp)) if exp.verdict is not None else []
    if not levels:
        return "-", "-"
    c = levels[0]
    figure = (
        f"{fmt_num(c.candidate_mean)} vs {fmt_num(c.baseline_mean)} {unit_of(c.metric)} "
        f"({c.workload} C={c.concurrency})"
    )
    return figure, f"{pct(c.delta_pct)} {interval(c.ci_low_pct, c.ci_high_pct)}"


_REOPENED: list[Any] = [None, -1, set()]  # the view (held: its id cannot be reused), its dead ends' count, the set


def reopened_ids(view: CampaignView) -> set[str]:
    """Once per view, not once per section: every scoreboard row and section asks (a
    5,000-experiment render built the set 10,000 times over 1,500 dead ends)."""
    if _REOPENED[0] is not view or _REOPENED[1] != len(view.dead_ends):
        _REOPENED[:] = [view, len(view.dead_ends), {d.experiment_id for d in view.dead_ends if d.reopened}]
    found: set[str] = _REOPENED[2]
    return found


def scoreboard_cells(view: CampaignView, exp: ExperimentView, number: int) -> list[Any]:
    """One scoreboard row without its link: what an incremental update caches."""
    figure, change = deciding_cells(exp)
    mark = marker(exp) + (", RE-OPENED" if exp.id in reopened_ids(view) else "")
    return [number, exp.hypothesis, mark, figure, Md(change)]  # the change: numbers formatted here


SCOREBOARD_HEADER = ["#", "hypothesis", "verdict", "deciding level: candidate vs baseline", Md("change [interval]"), ""]


def scoreboard_table(prefixes: list[str], links: dict[str, str], ids: list[str]) -> Md:
    """Cached row prefixes plus each experiment's link (its section here, or its own page)."""
    return linked_table(SCOREBOARD_HEADER, prefixes, [links[i] for i in ids])


# ------------------------------------------------------------------ dead ends
DEAD_END_HEADER = ["hypothesis", "why it is a dead end", "failed in", "revisit when", ""]


def dead_end_cells(d: DeadEnd) -> list[Any]:
    shown = list(dict.fromkeys([*d.revisit_on, "gpu", "arch", "cuda", "engine_version"]))
    env = ", ".join(f"{k} {d.environment[k]}" for k in shown if d.environment.get(k)) or "-"
    revisit = (
        " or ".join(f"{c} changes (was {d.environment.get(c, 'unknown')})" for c in d.revisit_on)
        or "no automatic revisit (the idea itself lost)"
    )
    why = f"{d.failure_class.value}: {d.reason}" if d.failure_class else d.reason
    return [Md("**RE-OPENED** " + mdsafe.cell(d.hypothesis)) if d.reopened else d.hypothesis, why, env, revisit]


def dead_end_rows(view: CampaignView, keys: dict[str, str], links: dict[str, str] | None = None) -> Md:
    hrefs = [
        (links or {}).get(d.experiment_id) or (f"#{keys[d.experiment_id]}" if d.experiment_id in keys else None)
        for d in view.dead_ends
    ]
    return linked_table(DEAD_END_HEADER, [row_prefix(dead_end_cells(d)) for d in view.dead_ends], hrefs)
