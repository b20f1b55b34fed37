"""Pure formatting for the journal: markers, figures, tables and per-section contexts.

Everything here returns `Md` (safe Markdown) built from escaped pieces, so the template
only lays sections out.  Numbers are node time; the unit comes from the verdict metric.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, NamedTuple, Protocol
from urllib.parse import quote

from campaign.journal import mdsafe
from campaign.journal.mdsafe import Md
from campaign.domain.models import ConfigChange, ReportedChange
from campaign.domain.records import BaselineView, CampaignView, DeadEnd, ExperimentView, LevelRow

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
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def fmt_duration(seconds: float) -> str:
    s = int(round(seconds))
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
    lines = ["| " + " | ".join(_cell(h) if h else " " for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
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
    short = experiment_id[len(view.id) + 1:] if experiment_id.startswith(f"{view.id}/") else experiment_id
    return f"exp-{mdsafe.slug(short)}.png"


def plot_workloads(exp: ExperimentView) -> list[str]:
    """Workloads with more than one measured level: what an experiment's plot shows."""
    names = list(dict.fromkeys(r.workload for r in exp.rows))
    return [w for w in names if sum(1 for r in exp.rows if r.workload == w and r.candidate is not None) > 1]


# ------------------------------------------------------------------ experiments
def metric_of(exp: ExperimentView) -> str:
    return next((r.comparison.metric for r in exp.rows if r.comparison), "output_tokens_per_s")


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
        return "DEAD END (mixed regime)" if "candidate" in v.regimes.values() or "mixed" in v.regimes.values() \
            else "DEAD END (slower)"
    if v.confounded_by:
        return "INCONCLUSIVE (confounded: " + ", ".join(c.key for c in v.confounded_by) + ")"
    reason = v.reason.split(";")[0].split(". ")[0].strip()
    return f"INCONCLUSIVE ({reason[:48] + '...' if len(reason) > 48 else reason or 'noise'})"


def headline_of(names: list[str], preferred: str | None) -> str:
    """The headline workload among those measured: the playbook's first workload
    (`CampaignView.headline_workload`), else the first measured."""
    return preferred if preferred in names else names[0]


def _headline_row(rows: list[LevelRow], preferred: str | None) -> LevelRow | None:
    measured = [r for r in rows if r.candidate is not None]
    if not measured:
        return None
    workload = headline_of([r.workload for r in measured], preferred)
    return min((r for r in measured if r.workload == workload), key=lambda r: r.concurrency)


def headline(exp: ExperimentView, preferred: str | None = None) -> tuple[str, str]:
    """The scoreboard's figure and its change vs the baseline."""
    if exp.failure is not None:  # what it measured before it crashed is evidence, not a figure
        return f"crashed ({exp.failure.phase})", "-"
    row = _headline_row(exp.rows, preferred)
    if row is None:
        return "-", "-"
    delta = exp.verdict.headline_delta_pct if exp.verdict and exp.verdict.headline_delta_pct is not None else None
    if delta is None and row.comparison is not None:
        delta = row.comparison.delta_pct
    if delta is None and row.baseline:
        delta = (row.candidate / row.baseline - 1) * 100  # type: ignore[operator]
    return f"{fmt_num(row.candidate)} {unit_of(metric_of(exp))} ({row.workload}, C={row.concurrency})", fmt_pct(delta)


def winner_text(row: LevelRow) -> str:
    c = row.comparison
    if c is None:
        return "-"
    if c.winner == "candidate":
        return f"candidate (+{c.delta_pct:.1f}%)"
    if c.winner == "baseline":
        adv = (c.baseline_mean / c.candidate_mean - 1) * 100 if c.candidate_mean else float("inf")
        return f"baseline (+{adv:.1f}%)"
    return f"tie ({fmt_pct(c.delta_pct)})"


def regimes_sentence(exp: ExperimentView) -> Md | None:
    """"candidate wins single_stream; baseline wins parallel at every C"."""
    if exp.verdict is None or not exp.verdict.regimes:
        return None
    parts = []
    for wl, regime in exp.verdict.regimes.items():
        levels = [r.comparison for r in exp.rows if r.workload == wl and r.comparison]
        name = mdsafe.text(wl)
        if regime in ("candidate", "baseline"):
            every = " at every C" if len(levels) > 1 and all(lv.winner == regime for lv in levels) else ""
            parts.append(f"{regime} wins {name}{every}")
        elif regime == "tie":
            parts.append(f"no significant difference on {name}")
        else:
            cand = ", ".join(str(lv.concurrency) for lv in levels if lv.winner == "candidate") or "none"
            base = ", ".join(str(lv.concurrency) for lv in levels if lv.winner == "baseline") or "none"
            parts.append(f"mixed on {name}: candidate wins at C = {cand}, baseline at C = {base}")
    return Md("; ".join(parts))


def level_table(exp: ExperimentView, workload: str, confidence: float) -> Md:
    from campaign.verdict.rule import level_confidence, loss_bound  # scipy: only when a table is drawn

    rows = [r for r in exp.rows if r.workload == workload]
    unit = unit_of(metric_of(exp))
    limits = any(r.comparison and (r.comparison.candidate_meets_limit is not None
                                   or r.comparison.baseline_meets_limit is not None) for r in rows)
    # the winner's interval is Bonferroni-corrected over every compared level; the
    # no-loss bound is one-sided at the playbook's confidence (campaign.verdict.rule)
    k = sum(1 for r in exp.rows if r.comparison)
    header = ["C", f"candidate ({unit})", f"baseline ({unit})", "winner",
              f"± ({level_confidence(confidence, k) * 100:.3g}% CI)", f"no worse than ({confidence * 100:.0f}%)"]
    header += ["latency limit (cand / base)"] if limits else []
    lines: list[str] = [table(header, [])]
    for r in sorted(rows, key=lambda r: r.concurrency):
        c = r.comparison
        ci = f"±{(c.ci_high_pct - c.ci_low_pct) / 2:.1f}%" if c else "-"
        bound = f"{loss_bound(c):+.1f}%" if c else "-"
        # every cell is a number or word this function formats: nothing to escape, and the
        # row is joined here, not cell by cell (1,000 experiments' tables have 100,000 cells)
        line = [str(r.concurrency), fmt_num(r.candidate), fmt_num(r.baseline), winner_text(r), ci, bound]
        if limits:
            def ok(v: bool | None) -> str:
                return "-" if v is None else ("ok" if v else "MISSED")
            line.append(f"{ok(c.candidate_meets_limit)} / {ok(c.baseline_meets_limit)}" if c else "-")
        lines.append("| " + " | ".join(line) + " |")
    return Md("\n".join(lines))


def _environment_line(components: dict[str, str]) -> Md | None:
    items = [f"{mdsafe.text(k)} {mdsafe.code(v)}" for k, v in components.items() if v and v != "0"]
    return Md(", ".join(items)) if items else None


_FIRSTS: list[Any] = [None, 0, None]  # the view (held: its id cannot be reused), its size, the tables


def _environment_firsts(view: CampaignView) -> tuple[dict[str, int], dict[str, int]]:
    """Experiment numbers and, per environment, the first experiment that had it: once per
    view, not once per section (a 1,000-experiment journal would compare 500,000 pairs)."""
    if view.numbers is not None and view.environment_first is not None:  # a window of the campaign
        return view.numbers, {env: view.numbers[i] for env, i in view.environment_first.items() if i in view.numbers}
    if _FIRSTS[0] is not view or _FIRSTS[1] != len(view.experiments):
        numbers: dict[str, int] = {}
        first: dict[str, int] = {}
        dumped: dict[int, str] = {}  # experiments of one environment share its record: dump it once
        for i, e in enumerate(view.experiments, 1):
            numbers[e.id] = i
            if e.environment is not None:
                key = dumped.get(id(e.environment))
                if key is None:
                    key = dumped[id(e.environment)] = e.environment.model_dump_json()
                first.setdefault(key, i)
        _FIRSTS[:] = [view, len(view.experiments), (numbers, first)]
    firsts: tuple[dict[str, int], dict[str, int]] = _FIRSTS[2]
    return firsts


def experiment_context(view: CampaignView, exp: ExperimentView, key: str, plot: str | None,
                       notes: NotesSource) -> dict[str, Any]:
    v = exp.verdict
    confidence = v.confidence if v else 0.95
    undeclared = {(c.kind, c.key) for c in v.confounded_by} if v else set()
    diff = table(["kind", "key", "before", "after", ""],
                 [[c.kind, Md(mdsafe.code(c.key, in_table=True)), fmt_value(c.before), fmt_value(c.after),
                   "NOT DECLARED by the hypothesis" if (c.kind, c.key) in undeclared else c.change]
                  for c in exp.config_diff]) if exp.config_diff else None
    workloads = list(dict.fromkeys(r.workload for r in exp.rows))
    failure = exp.failure
    evidence = None
    if failure is not None:
        code = f", exit code {failure.exit_code}" if failure.exit_code is not None else ""
        evidence = {"summary": Md(f"{mdsafe.code(failure.failure_class.value)} in phase {failure.phase}{code}: "
                                  f"{mdsafe.text(failure.summary)}"),
                    "block": Md(mdsafe.code_block(failure.evidence)) if failure.evidence else None}
    corr = v.correctness if v else None
    environment = None
    if exp.environment is not None:  # repeated fingerprints point at the first experiment that had it
        number, first = _environment_firsts(view)
        same = first.get(exp.environment.model_dump_json())
        same = same if same is not None and same < number[exp.id] else None
        environment = Md(f"same as experiment {same}") if same else _environment_line(exp.environment.components())
    meta = [f"source {mdsafe.text(exp.source)}", f"attempt {exp.attempt}", f"status {mdsafe.text(exp.status)}",
            f"node {mdsafe.text(exp.node or view.node or '-')}", f"node time {fmt_duration(exp.node_seconds)}",
            f"started {fmt_time(exp.started_at)}"]
    return {
        "anchor": Md(key),
        "title": mdsafe.text(exp.hypothesis),
        "marker": Md(mdsafe.text(marker(exp)) + (", RE-OPENED" if exp.id in reopened_ids(view) else "")),
        "meta": Md(" · ".join(meta)),
        "rationale": Md(mdsafe.paragraphs(exp.rationale)) if exp.rationale.strip() else None,
        "verdict": Md(mdsafe.text(v.reason) + (f" (confidence {confidence * 100:.0f}%, {exp.repeats} repeats)"
                                                 if exp.rows else "")) if v else None,
        "regimes": regimes_sentence(exp),
        "verdict_notes": [mdsafe.text(n) for n in (exp.verdict.notes if exp.verdict else [])],
        "confounded": confounded_sentence(v.confounded_by) if v and v.confounded_by else None,
        "diff": diff,
        "reported": reported_table(v.reported_diff) if v and v.reported_diff else None,
        "workloads": [{"name": mdsafe.text(w), "table": level_table(exp, w, confidence)} for w in workloads],
        "plot": Md(f"![{mdsafe.text(exp.hypothesis)}: throughput vs concurrency]({quote(plot, safe='/._-')})")
        if plot else None,
        "correctness": Md(f"{'passed' if corr.passed else '**FAILED**'}: {corr.mismatches} of {corr.prompts} "
                          f"prompts differ from the baseline (tolerance {corr.tolerance * 100:g}%)") if corr else None,
        "correctness_examples": Md(mdsafe.code_block(corr.examples)) if corr and corr.examples else None,
        "evidence": evidence,
        "environment": environment,
        "patch": patch_line(exp),
        "patch_diff": patch_details(exp),
        "command": Md(mdsafe.code(exp.command)) if exp.command else None,
        "analysis": Md(mdsafe.blockquote(exp.analysis)) if exp.analysis and exp.analysis.strip() else None,
        "notes": notes.block(key),
        "has_notes": notes.has(key),
    }


def _moved(c: ConfigChange) -> str:
    return f"{mdsafe.code(c.key)} ({mdsafe.text(fmt_value(c.before))} -> {mdsafe.text(fmt_value(c.after))})"


def confounded_sentence(changes: list[ConfigChange]) -> Md:
    """Why the effect cannot be attributed: undeclared changes (requested, then as the
    servers report them), declared flags a server ignored or overrode."""
    clauses = []
    asked = [c for c in changes if not c.reported and c.change in ("added", "removed", "changed")]
    seen = [c for c in changes if c.reported and c.change in ("added", "removed", "changed")]
    if asked:
        clauses.append("this run also changed " + ", ".join(_moved(c) for c in asked)
                       + ", which the hypothesis did not declare")
    if seen:
        clauses.append("the servers report " + ", ".join(_moved(c) for c in seen)
                       + ", which the hypothesis did not declare")
    for c in changes:
        if c.change in ("ignored", "overridden"):
            ran = "as the baseline does" if c.change == "ignored" else "instead"
            clauses.append(f"the candidate's server {c.change} {mdsafe.code(c.key)}: asked for "
                           f"{mdsafe.text(fmt_value(c.requested))}, it reports {mdsafe.text(fmt_value(c.after))} {ran}")
    text = "; ".join(clauses)
    return Md(text[:1].upper() + text[1:] + ": its effect cannot be attributed.")


_STATUS = {"declared": "declared", "ignored": "IGNORED by the server", "overridden": "OVERRIDDEN by the server",
           "undeclared": "NOT DECLARED by the hypothesis"}


def reported_table(rows: list[ReportedChange]) -> Md:
    """What the two servers report differently (settings both report), and why each may differ."""
    def status(r: ReportedChange) -> Md:
        if r.status == "follows":
            return Md("follows from " + ", ".join(mdsafe.code(f, in_table=True) for f in r.follows))
        asked = f" (asked {fmt_value(r.requested)})" if r.status in ("ignored", "overridden") else ""
        return Md(mdsafe.cell(_STATUS[r.status] + asked))

    return table(["kind", "key", "baseline server", "candidate server", ""],
                 [[r.kind, Md(mdsafe.code(r.key, in_table=True)), fmt_value(r.baseline), fmt_value(r.candidate),
                   status(r)] for r in rows])


def patch_line(exp: ExperimentView) -> Md | None:
    """The commit the candidate ran from: SHA, branch, base, patch files' sha256."""
    rec = exp.patch
    if rec is None:
        return Md(mdsafe.code(exp.patch_sha)) if exp.patch_sha else None
    if not rec.branch:
        return Md(f"unpatched: {mdsafe.code(rec.sha)} (the base)")
    files = ", ".join(f"{mdsafe.text(p.rsplit('/', 1)[-1])} (sha256 {mdsafe.code(d[:16])})"
                      for p, d in zip(rec.patches, rec.patch_sha256))
    return Md(f"{mdsafe.code(rec.sha)} on branch {mdsafe.code(rec.branch)}, base {mdsafe.code(rec.base)}; "
              f"patches: {files}")


def patch_details(exp: ExperimentView) -> Md | None:
    """`git diff --stat` and the diff itself (escaped), collapsed."""
    rec = exp.patch
    if rec is None or not rec.branch:
        return None
    n = len(rec.files)
    return Md(f"<details><summary>diff: {n} file{'s' if n != 1 else ''} changed</summary>\n\n"
              + mdsafe.code_block(f"{rec.stat}\n\n{rec.diff}", info="diff") + "\n\n</details>")


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
    figure, change = headline(exp, view.headline_workload)
    mark = marker(exp) + (", RE-OPENED" if exp.id in reopened_ids(view) else "")
    return [number, exp.hypothesis, mark, figure, change]


SCOREBOARD_HEADER = ["#", "hypothesis", "verdict", "headline", "vs baseline", ""]


def scoreboard_table(prefixes: list[str], links: dict[str, str], ids: list[str]) -> Md:
    """Cached row prefixes plus each experiment's link (its section here, or its own page)."""
    return linked_table(SCOREBOARD_HEADER, prefixes, [links[i] for i in ids])


def scoreboard_rows(view: CampaignView, keys: dict[str, str]) -> Md:
    ids = [e.id for e in view.experiments]
    rows = [row_prefix(scoreboard_cells(view, e, n)) for n, e in enumerate(view.experiments, 1)]
    return scoreboard_table(rows, {i: f"#{keys[i]}" for i in ids}, ids)


# ------------------------------------------------------------------ baseline, dead ends
class BaselineHeadline(NamedTuple):
    """A baseline's headline figure: its workload's lowest level."""
    workload: str
    concurrency: int
    value: float

    @property
    def label(self) -> str:
        return f"{self.workload} C={self.concurrency}"


def baseline_headline(b: BaselineView, preferred: str | None = None) -> BaselineHeadline | None:
    if not b.figures:
        return None
    workload = headline_of(list(b.figures), preferred)
    levels = b.figures[workload]
    if not levels:
        return None
    c = min(levels)
    return BaselineHeadline(workload, c, levels[c])


def not_compared(head: BaselineHeadline, b: BaselineView, was_head: BaselineHeadline, was: BaselineView) -> str | None:
    """Why two baselines' headlines do not compare (None: they do): the headline moved
    to another workload or level, or its workload's requests changed (longer outputs,
    other counts, another prompt order: `campaign.domain.work`).  Either way the change
    between them is not a speed-up or a slow-down."""
    if (head.workload, head.concurrency) != (was_head.workload, was_head.concurrency):
        return f"not compared (the headline was {was_head.label})"
    now, then = b.work.get(head.workload), was.work.get(head.workload)
    if now is not None and then is not None and now.key != then.key:
        return f"not compared (other work: {'; '.join(now.differences(then))})"
    return None


def _headline_change(head: BaselineHeadline, b: BaselineView, previous: tuple[BaselineHeadline, BaselineView]) -> str:
    """The headline's change since the baseline before, or why it is not given."""
    was_head, was = previous
    why = not_compared(head, b, was_head, was)
    return mdsafe.text(why) if why else fmt_pct((head.value / was_head.value - 1) * 100)


def baseline_context(view: CampaignView) -> dict[str, Any] | None:
    b = view.baseline
    if b is None:
        return None
    unit = unit_of(next((metric_of(e) for e in view.experiments if e.rows), "output_tokens_per_s"))
    figures = []
    for wl, levels in b.figures.items():
        if len(levels) == 1:
            (c, x), = levels.items()
            figures.append(Md(f"**{mdsafe.text(wl)}**: {fmt_num(x)} {unit} at C={c}"))
        elif levels:
            peak = max(levels, key=lambda c: levels[c])
            by_c = " · ".join(f"{c}: {fmt_num(levels[c])}" for c in sorted(levels))
            figures.append(Md(f"**{mdsafe.text(wl)}** ({unit} by C): {by_c} (peak {fmt_num(levels[peak])} at C={peak})"))
    history, previous = [], None
    for h in view.baseline_history:
        head = baseline_headline(h, view.headline_workload)
        fig = f"{fmt_num(head.value)} {unit} ({mdsafe.text(head.label)})" if head else "no figures"
        change = f", {_headline_change(head, h, previous)}" if head and previous else ""
        history.append(Md(f"{mdsafe.text(h.reason or 'measured')}: {fig}{change}, "
                          f"{mdsafe.code(h.experiment_id)}, {fmt_time(h.measured_at)}"))
        previous = (head, h) if head else previous
    return {
        "id": Md(mdsafe.code(b.experiment_id)),
        "reason": mdsafe.text(b.reason) if b.reason else None,
        "measured": fmt_time(b.measured_at),
        "noise": (f"±{b.noise_pct:.1f}%" + (f" over {b.launches} launches" if b.launches else "")
                  if b.noise_pct is not None else None),
        "config": config_code(b.config.flags, b.config.env),
        "figures": figures,
        "history": history,
    }


DEAD_END_HEADER = ["hypothesis", "why it is a dead end", "failed in", "revisit when", ""]


def dead_end_cells(d: DeadEnd) -> list[Any]:
    shown = list(dict.fromkeys([*d.revisit_on, "gpu", "arch", "cuda", "engine_version"]))
    env = ", ".join(f"{k} {d.environment[k]}" for k in shown if d.environment.get(k)) or "-"
    revisit = " or ".join(f"{c} changes (was {d.environment.get(c, 'unknown')})" for c in d.revisit_on) \
        or "no automatic revisit (the idea itself lost)"
    why = f"{d.failure_class.value}: {d.reason}" if d.failure_class else d.reason
    return [Md("**RE-OPENED** " + mdsafe.cell(d.hypothesis)) if d.reopened else d.hypothesis, why, env, revisit]


def dead_end_rows(view: CampaignView, keys: dict[str, str], links: dict[str, str] | None = None) -> Md:
    hrefs = [(links or {}).get(d.experiment_id) or (f"#{keys[d.experiment_id]}" if d.experiment_id in keys else None)
             for d in view.dead_ends]
    return linked_table(DEAD_END_HEADER, [row_prefix(dead_end_cells(d)) for d in view.dead_ends], hrefs)
