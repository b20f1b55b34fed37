"""One experiment's section of the journal: its verdict and regimes, the per-level tables,
what the two servers ran differently, the evidence of a crash, the environment and the
commit it ran from.  Every piece is escaped here (`mdsafe`); the template only lays it out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from campaign.domain.models import ConfigChange, Failure, ReportedChange
from campaign.domain.records import CampaignView, ExperimentView, LatencyLimitView, LevelRow, Verdict
from campaign.journal import mdsafe
from campaign.journal.format import (
    NotesSource,
    bar_of,
    fmt_duration,
    fmt_num,
    fmt_time,
    fmt_value,
    metric_of,
    reopened_ids,
    table,
    unit_of,
)
from campaign.journal.latency_cells import latency_cells, latency_header, limit_cell, limit_header
from campaign.journal.mdsafe import Md
from campaign.verdict.explain import compared_levels, decided_line, interval, marker, next_step, pct

__all__ = [
    "confounded_sentence",
    "experiment_context",
    "level_table",
    "patch_details",
    "patch_line",
    "regimes_sentence",
    "reported_table",
    "winner_text",
]


def winner_text(row: LevelRow) -> str:
    """The side that won the level; the change itself is in its own column."""
    c = row.comparison
    if c is None:
        return "-"
    return f"{c.winner} (latency limit)" if c.limit_decided else c.winner


def regimes_sentence(exp: ExperimentView) -> Md | None:
    """ "candidate wins single_stream; baseline wins parallel at every C"."""
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


def _confidences(rows: list[LevelRow], fallback: float) -> list[float]:
    """The confidence each row's interval was drawn at (Holm's or Bonferroni's level,
    `campaign.verdict.multiplicity`); a record without it: Bonferroni over its levels."""
    return [
        r.comparison.level_confidence if r.comparison.level_confidence is not None else fallback
        for r in rows
        if r.comparison is not None
    ]


def _conf(x: float) -> str:
    return f"{x * 100:.3g}%"


def level_table(exp: ExperimentView, workload: str, confidence: float, limit: LatencyLimitView | None = None) -> Md:
    """One workload's levels: both sides' figures, the candidate's change with its
    interval at the confidence the row used, the one-sided no-loss bound, the winner.
    The columns are one list: a new column (latency) is one more entry."""
    from campaign.verdict.rule import level_confidence, loss_bound  # scipy: only when a table is drawn

    rows = sorted((r for r in exp.rows if r.workload == workload), key=lambda r: r.concurrency)
    unit = unit_of(metric_of(exp))
    fallback = level_confidence(confidence, sum(1 for r in exp.rows if r.comparison))
    confs = [_conf(x) for x in _confidences(rows, fallback)]
    one = len(set(confs)) <= 1  # one confidence (as printed): in the header; several (Holm): in each cell

    def ci(r: LevelRow) -> str:
        c = r.comparison
        if c is None:
            return "-"
        shown = interval(c.ci_low_pct, c.ci_high_pct)
        at = c.level_confidence if c.level_confidence is not None else fallback
        return shown if one else f"{shown} at {_conf(at)}"

    # every cell is a number or word formatted here: nothing to escape, and the row is
    # joined here, not cell by cell (1,000 experiments' tables have 100,000 cells)
    columns: list[tuple[str, Callable[[LevelRow], str]]] = [
        ("C", lambda r: str(r.concurrency)),
        (f"candidate ({unit})", lambda r: fmt_num(r.candidate)),
        (f"baseline ({unit})", lambda r: fmt_num(r.baseline)),
        ("change", lambda r: pct(r.comparison.delta_pct) if r.comparison else "-"),
        (f"interval ({confs[0]} confidence)" if one and confs else "interval (confidence)", ci),
        (
            f"no worse than ({confidence * 100:.0f}% one-sided)",
            lambda r: pct(loss_bound(r.comparison)) if r.comparison else "-",
        ),
        ("winner", winner_text),
    ]
    if any(r.latency for r in rows):  # compact p50/p99 per side (campaign.journal.latency_cells)

        def latency_column(i: int) -> Callable[[LevelRow], str]:
            return lambda r: latency_cells(r)[i]

        columns += [(h, latency_column(i)) for i, h in enumerate(latency_header())]
    if any(
        r.comparison
        and (r.comparison.candidate_meets_limit is not None or r.comparison.baseline_meets_limit is not None)
        for r in rows
    ):
        columns.append((limit_header(limit), lambda r: limit_cell(r, limit)))
    lines: list[str] = [table([h for h, _ in columns], [])]
    lines += ["| " + " | ".join(cell(r) for _, cell in columns) + " |" for r in rows]
    return Md("\n".join(lines))


def bar_sentence(m: float) -> Md:
    """The rule the tables are read by, with the playbook's bar."""
    return Md(
        f"A level counts as won when its whole interval lies above {pct(m)} (candidate) or below "
        f'{pct(-m)} (baseline); to win overall, every level\'s "no worse than" bound must also lie above {pct(-m)}.'
    )


def screened_line(v: Verdict, workload: str) -> Md | None:
    """Under a workload's table where the stall screen took something out of the comparison
    (the figures above are what it compared, `campaign.verdict.launches`; a verdict
    recorded before 6cbc8b0 stored every launch's raw mean there)."""
    e = next((e for e in v.effects if e.workload == workload), None)
    if e is None or not (e.stalled_baseline or e.stalled_candidate):
        return None
    return Md(
        f"Stalls the screen left out of this comparison: {e.stalled_baseline} baseline, "
        f"{e.stalled_candidate} candidate (a whole launch, or one level of a launch, far below the "
        "node's noise)."
    )


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


def _tried_item(c: ConfigChange) -> str:
    name = c.key if c.kind == "env" else f"--{c.key}"
    if c.change == "removed":
        return f"{mdsafe.code(name)} removed (was {mdsafe.text(fmt_value(c.before))})"
    now = (
        f"{c.key}={fmt_value(c.after)}"
        if c.kind == "env"
        else (name if c.after is True else f"{name} {fmt_value(c.after)}")
    )
    was = "" if c.change == "added" else f" (was {mdsafe.text(fmt_value(c.before))})"
    return mdsafe.code(now) + was


def tried_line(exp: ExperimentView) -> Md:
    """What the candidate changed against its baseline: flags, env, patches."""
    items = [_tried_item(c) for c in exp.config_diff]
    if exp.patch is not None and exp.patch.branch:
        items.append("patch " + ", ".join(mdsafe.text(p.rsplit("/", 1)[-1]) for p in exp.patch.patches))
    return Md(", ".join(items) if items else "nothing its baseline did not run (the same configuration)")


def noise_words(v: Verdict) -> str:
    """The noise model in plain words: how far one launch of the node lands from another."""
    parts = [f"{mdsafe.text(e.workload)} {e.noise_pct:.1f}%" for e in v.effects if e.noise_pct is not None]
    return "run-to-run noise of one server launch: " + ", ".join(parts) if parts else ""


def details_block(exp: ExperimentView, v: Verdict, confidence: float) -> Md:
    """The statistics behind the verdict, folded: the verdict as recorded, the regimes,
    the noise model, rounds and stopping, screening, the workloads' provenance."""
    words = noise_words(v)
    summary = "How it was decided" + (f" ({words}; {exp.repeats} launches a side)" if words and exp.repeats else "")
    lines = [f"<details><summary>{summary}</summary>", ""]
    if exp.rows:
        lines.append(
            f"- verdict as recorded: {mdsafe.text(v.reason)} (confidence {confidence * 100:.0f}%, "
            f"{exp.repeats} repeats)"
        )
    else:
        lines.append(f"- verdict as recorded: {mdsafe.text(v.reason)}")
    regimes = regimes_sentence(exp)
    if regimes:
        lines.append(f"- regimes: {regimes}")
    lines += [f"- {mdsafe.text(n)}" for n in v.notes]
    lines += ["", "</details>"]
    return Md("\n".join(lines))


def experiment_context(
    view: CampaignView, exp: ExperimentView, key: str, plot: str | None, notes: NotesSource
) -> dict[str, Any]:
    v = exp.verdict
    confidence = v.confidence if v else 0.95
    undeclared = {(c.kind, c.key) for c in v.confounded_by} if v else set()
    diff = (
        table(
            ["kind", "key", "before", "after", ""],
            [
                [
                    c.kind,
                    Md(mdsafe.code(c.key, in_table=True)),
                    fmt_value(c.before),
                    fmt_value(c.after),
                    "NOT DECLARED by the hypothesis" if (c.kind, c.key) in undeclared else c.change,
                ]
                for c in exp.config_diff
            ],
        )
        if exp.config_diff
        else None
    )
    workloads = list(dict.fromkeys(r.workload for r in exp.rows))
    evidence = evidence_context(exp.failure) if exp.failure is not None else None
    corr = v.correctness if v else None
    environment = None
    if exp.environment is not None:  # repeated fingerprints point at the first experiment that had it
        number, first = _environment_firsts(view)
        same = first.get(exp.environment.model_dump_json())
        same = same if same is not None and same < number[exp.id] else None
        environment = Md(f"same as experiment {same}") if same else _environment_line(exp.environment.components())
    meta = [
        f"source {mdsafe.text(exp.source)}",
        f"attempt {exp.attempt}",
        f"status {mdsafe.text(exp.status)}",
        f"node {mdsafe.text(exp.node or view.node or '-')}",
        f"node time {fmt_duration(exp.node_seconds)}",
        f"started {fmt_time(exp.started_at)}",
    ]
    return {
        "anchor": Md(key),
        "title": mdsafe.text(exp.hypothesis),
        "marker": Md(mdsafe.text(marker(exp)) + (", RE-OPENED" if exp.id in reopened_ids(view) else "")),
        "meta": Md(" · ".join(meta)),
        "rationale": Md(mdsafe.paragraphs(exp.rationale)) if exp.rationale.strip() else None,
        "tried": tried_line(exp),
        "decided": Md(mdsafe.text(decided_line(v, bar_of(view, exp), compared_levels(exp)))) if v else None,
        "next": Md(mdsafe.text(next_step(exp, exp.id in reopened_ids(view)))),
        "details": details_block(exp, v, confidence) if v and (exp.rows or v.notes) else None,
        "bar": bar_sentence(bar_of(view, exp)) if any(r.comparison for r in exp.rows) else None,
        "confounded": confounded_sentence(v.confounded_by) if v and v.confounded_by else None,
        "diff": diff,
        "reported": reported_table(v.reported_diff) if v and v.reported_diff else None,
        "workloads": [
            {
                "name": mdsafe.text(w),
                "table": level_table(exp, w, confidence, view.latency_limit),
                "screened": screened_line(v, w) if v else None,
            }
            for w in workloads
        ],
        "plot": Md(f"![{mdsafe.text(exp.hypothesis)}: throughput vs concurrency]({quote(plot, safe='/._-')})")
        if plot
        else None,
        "correctness": Md(
            f"{'passed' if corr.passed else '**FAILED**'}: {corr.mismatches} of {corr.prompts} "
            f"prompts differ from the baseline (tolerance {corr.tolerance * 100:g}%)"
        )
        if corr
        else None,
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
        clauses.append(
            "this run also changed " + ", ".join(_moved(c) for c in asked) + ", which the hypothesis did not declare"
        )
    if seen:
        clauses.append(
            "the servers report " + ", ".join(_moved(c) for c in seen) + ", which the hypothesis did not declare"
        )
    for c in changes:
        if c.change in ("ignored", "overridden"):
            ran = "as the baseline does" if c.change == "ignored" else "instead"
            clauses.append(
                f"the candidate's server {c.change} {mdsafe.code(c.key)}: asked for "
                f"{mdsafe.text(fmt_value(c.requested))}, it reports {mdsafe.text(fmt_value(c.after))} {ran}"
            )
    text = "; ".join(clauses)
    return Md(text[:1].upper() + text[1:] + ": its effect cannot be attributed.")


_STATUS = {
    "declared": "declared",
    "ignored": "IGNORED by the server",
    "overridden": "OVERRIDDEN by the server",
    "undeclared": "NOT DECLARED by the hypothesis",
}


def reported_table(rows: list[ReportedChange]) -> Md:
    """What the two servers report differently (settings both report), and why each may differ."""

    def status(r: ReportedChange) -> Md:
        if r.status == "follows":
            return Md("follows from " + ", ".join(mdsafe.code(f, in_table=True) for f in r.follows))
        asked = f" (asked {fmt_value(r.requested)})" if r.status in ("ignored", "overridden") else ""
        return Md(mdsafe.cell(_STATUS[r.status] + asked))

    return table(
        ["kind", "key", "baseline server", "candidate server", ""],
        [
            [r.kind, Md(mdsafe.code(r.key, in_table=True)), fmt_value(r.baseline), fmt_value(r.candidate), status(r)]
            for r in rows
        ],
    )


def patch_line(exp: ExperimentView) -> Md | None:
    """The commit the candidate ran from: SHA, branch, base, patch files' sha256."""
    rec = exp.patch
    if rec is None:
        return Md(mdsafe.code(exp.patch_sha)) if exp.patch_sha else None
    if not rec.branch:
        return Md(f"unpatched: {mdsafe.code(rec.sha)} (the base)")
    files = ", ".join(
        f"{mdsafe.text(p.rsplit('/', 1)[-1])} (sha256 {mdsafe.code(d[:16])})"
        for p, d in zip(rec.patches, rec.patch_sha256)
    )
    return Md(
        f"{mdsafe.code(rec.sha)} on branch {mdsafe.code(rec.branch)}, base {mdsafe.code(rec.base)}; patches: {files}"
    )


def patch_details(exp: ExperimentView) -> Md | None:
    """`git diff --stat` and the diff itself (escaped), collapsed."""
    rec = exp.patch
    if rec is None or not rec.branch:
        return None
    n = len(rec.files)
    return Md(
        f"<details><summary>diff: {n} file{'s' if n != 1 else ''} changed</summary>\n\n"
        + mdsafe.code_block(f"{rec.stat}\n\n{rec.diff}", info="diff")
        + "\n\n</details>"
    )


def evidence_context(failure: Failure) -> dict[str, Md | None]:
    """A failure as the journal shows it: class, phase and summary, the log lines that
    decided the class (or the log's last lines), and where the whole log is."""
    code = f", exit code {failure.exit_code}" if failure.exit_code is not None else ""
    return {
        "summary": Md(
            f"{mdsafe.code(failure.failure_class.value)} in phase {failure.phase}{code}: {mdsafe.text(failure.summary)}"
        ),
        "block": Md(mdsafe.code_block(failure.evidence)) if failure.evidence else None,
        "log": Md(f"Server log: {mdsafe.code(failure.log_path)}") if failure.log_path else None,
    }
