"""`campaign compare A B`: two configurations side by side, judged as the loop judges.

A and B are `ID` (a campaign's current baseline) or `ID:EXPERIMENT`
(`campaign.store.compare`).  B is the candidate, A the baseline: every figure is
"B against A".  The levels both measured are paired (`campaign.verdict.side_by_side`,
which refuses other work in one line) and judged by the verdict the campaign itself
uses (`campaign.verdict.judge`, A's playbook's verdict settings): with the node's noise
model when both ran on one node in one environment of one campaign (as the loop
judges), else on the two sides' own launches alone.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import typer

from campaign.cli.common import DB_OPT, fail, open_store
from campaign.domain.errors import UserError

if TYPE_CHECKING:
    from campaign.store.facade import Store

__all__ = ["compare"]


def _latency(results: list[Any]) -> dict[str, list[float]]:
    from campaign.domain.records import LATENCY_METRICS, LATENCY_STATS

    return {f"{m}.{s}": [getattr(getattr(r, m), s) for r in results] for m in LATENCY_METRICS for s in LATENCY_STATS}


def side_by_side(store: Store, a_ref: str, b_ref: str) -> dict[str, Any]:
    """The comparison as data: both sides, each level's row, the verdict (B against A)."""
    from campaign.domain.records import LevelRow
    from campaign.store.compare import measured_side
    from campaign.store.latency import latency_means
    from campaign.verdict.judge import judge
    from campaign.verdict.side_by_side import pair_sides

    a, campaign_a = measured_side(store, a_ref)
    b, _ = measured_side(store, b_ref)
    pb = campaign_a.playbook_model()
    pairing = pair_sides(a, b, order=list(pb.workloads))
    noise = None
    if pairing.same_node(a, b):  # one node's launches: its noise model, as the loop judges
        from campaign.loop.experiment import node_noise

        noise = node_noise(store, a.campaign_id, a.node, a.environment, pb.verdict.metric, work=a.work)
    verdict = judge(pairing.samples, pb.verdict, noise, primary_workload=pairing.samples[0].workload)
    by_level = {(c.workload, c.concurrency): c for c in verdict.levels}
    rows = [
        LevelRow(
            workload=s.workload,
            concurrency=s.concurrency,
            comparison=by_level.get((s.workload, s.concurrency)),
            baseline=sum(getattr(r, pb.verdict.metric) for r in s.baseline) / len(s.baseline),
            candidate=sum(getattr(r, pb.verdict.metric) for r in s.candidate) / len(s.candidate),
            latency=latency_means({"candidate": _latency(s.candidate), "baseline": _latency(s.baseline)}),
        )
        for s in pairing.samples
    ]
    return {
        "a": a.model_dump(include={"label", "experiment_id", "side"}) | {"launches": _launches(a.levels)},
        "b": b.model_dump(include={"label", "experiment_id", "side"}) | {"launches": _launches(b.levels)},
        "metric": pb.verdict.metric,
        "rows": rows,
        "verdict": verdict,
        "noise": verdict.noise,
        "only_a": pairing.only_a,
        "only_b": pairing.only_b,
    }


def _launches(levels: dict[Any, list[Any]]) -> int:
    return max((len(v) for v in levels.values()), default=0)


def _print(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from campaign.cli.plain import line, plain
    from campaign.journal.format import fmt_num, fmt_pct, unit_of
    from campaign.journal.latency_cells import latency_cells

    probe = Console()
    con = Console(highlight=False, width=None if probe.is_terminal else 150)  # a pipe gets whole rows
    a, b, v = doc["a"], doc["b"], doc["verdict"]
    for tag, s in (("A", a), ("B", b)):
        con.print(
            line(
                f"{tag}: ",
                (s["label"], "bold"),
                f" = {s['side']} side of ",
                (s["experiment_id"], ""),
                f", {s['launches']} launches",
            )
        )
    unit = unit_of(doc["metric"])
    for workload in dict.fromkeys(r.workload for r in doc["rows"]):
        t = Table(title=plain(f"{workload}: B against A"), title_justify="left")
        for name in (
            "C",
            f"A ({unit})",
            f"B ({unit})",
            "B vs A",
            "interval",
            "winner",
            "TTFT p50/p99 ms: B (A)",
            "ITL p50/p99 ms: B (A)",
        ):
            t.add_column(name, justify="right")
        for r in (r for r in doc["rows"] if r.workload == workload):
            c = r.comparison
            interval = f"[{fmt_pct(c.ci_low_pct)}, {fmt_pct(c.ci_high_pct)}]" if c else "-"
            t.add_row(
                str(r.concurrency),
                fmt_num(r.baseline),
                fmt_num(r.candidate),
                fmt_pct(c.delta_pct if c else None),
                interval,
                c.winner.replace("candidate", "B").replace("baseline", "A") if c else "-",
                *latency_cells(r),
            )
        con.print(t)
    for tag, levels in (("A", doc["only_a"]), ("B", doc["only_b"])):
        if levels:
            con.print(line(f"only {tag} measured: ", (", ".join(f"{w} C={c}" for w, c in levels), "")))
    from campaign.verdict.explain import decided_line  # the journal's reading: the deciding level, the bar

    bar = v.min_effect_pct if v.min_effect_pct is not None else 0.0  # judge's verdicts record the bar they used
    con.print(line(("verdict (B as the candidate, A as the baseline): ", "bold"), (decided_line(v, bar), "")))
    con.print(line(f"confidence {v.confidence * 100:.0f}%, A's playbook's bar; ", (v.noise, "")))


def compare(
    a: str = typer.Argument(..., help="the baseline: ID (a campaign's current baseline) or ID:EXPERIMENT"),
    b: str = typer.Argument(..., help="the candidate: ID or ID:EXPERIMENT"),
    db: str | None = DB_OPT,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Two experiments or two campaigns side by side on the same workloads, with a verdict."""
    from campaign.cli.ids import resolve_side

    try:
        doc = side_by_side(open_store(db), resolve_side(a, db), resolve_side(b, db))
    except UserError as exc:
        fail(exc)
    if as_json:
        out = doc | {
            "rows": [r.model_dump(mode="json") for r in doc["rows"]],
            "verdict": doc["verdict"].model_dump(mode="json"),
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    _print(doc)
