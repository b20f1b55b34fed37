"""One experiment's section of the journal: its verdict and regimes, the per-level tables,
what the two servers ran differently, the evidence of a crash, the environment and the
commit it ran from.  Every piece is escaped here (`mdsafe`); the template only lays it out.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from campaign.domain.models import ConfigChange, Failure, ReportedChange
from campaign.domain.records import CampaignView, ExperimentView, LevelRow, Verdict
from campaign.journal import mdsafe
from campaign.journal.format import (
    NotesSource,
    fmt_duration,
    fmt_num,
    fmt_pct,
    fmt_time,
    fmt_value,
    marker,
    metric_of,
    reopened_ids,
    table,
    unit_of,
    winner_margin,
)
from campaign.journal.mdsafe import Md

__all__ = ["confounded_sentence", "experiment_context", "level_table", "patch_details", "patch_line",
           "regimes_sentence", "reported_table", "winner_text"]


def winner_text(row: LevelRow) -> str:
    c = row.comparison
    if c is None:
        return "-"
    if c.winner == "tie":
        return f"tie ({fmt_pct(c.delta_pct)})"
    margin = winner_margin(c)
    if margin is None:
        return f"{c.winner} (latency limit; candidate {fmt_pct(c.delta_pct)})"
    return f"{c.winner} (+{margin:.1f}%{'; latency limit' if c.limit_decided else ''})"


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


def screened_line(v: Verdict, workload: str) -> Md | None:
    """Under a workload's table where the stall screen took something out of the comparison
    (the figures above are what it compared, `campaign.verdict.launches`; a verdict
    recorded before 6cbc8b0 stored every launch's raw mean there)."""
    e = next((e for e in v.effects if e.workload == workload), None)
    if e is None or not (e.stalled_baseline or e.stalled_candidate):
        return None
    return Md(f"Stalls the screen left out of this comparison: {e.stalled_baseline} baseline, "
              f"{e.stalled_candidate} candidate (a whole launch, or one level of a launch, far below the "
              "node's noise).")


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
    evidence = evidence_context(exp.failure) if exp.failure is not None else None
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
        "workloads": [{"name": mdsafe.text(w), "table": level_table(exp, w, confidence),
                       "screened": screened_line(v, w) if v else None} for w in workloads],
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


def evidence_context(failure: Failure) -> dict[str, Md | None]:
    """A failure as the journal shows it: class, phase and summary, the log lines that
    decided the class (or the log's last lines), and where the whole log is."""
    code = f", exit code {failure.exit_code}" if failure.exit_code is not None else ""
    return {"summary": Md(f"{mdsafe.code(failure.failure_class.value)} in phase {failure.phase}{code}: "
                          f"{mdsafe.text(failure.summary)}"),
            "block": Md(mdsafe.code_block(failure.evidence)) if failure.evidence else None,
            "log": Md(f"Server log: {mdsafe.code(failure.log_path)}") if failure.log_path else None}
