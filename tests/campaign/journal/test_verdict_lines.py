"""One convention for reading a verdict, everywhere: the candidate's change against the
baseline, signed ("+9.4% faster", "-55.5% slower"); an interval as its two true ends; the
bar it had to clear; the confidence a table's rows actually use; the reason first, the
statistics folded; the scoreboard's figure is the level that decided."""

from __future__ import annotations

import re

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from campaign.domain.models import ConfigChange
from campaign.domain.records import (
    CampaignView,
    ExperimentView,
    LevelComparison,
    LevelRow,
    Verdict,
    WorkloadEffect,
)
from campaign.journal.plots import _level_data
from campaign.journal.render import render_journal
from campaign.store.view import show_json

M = 3.0  # the playbook's bar: not the default 2%, so a hard-coded bar shows


def level(
    wl: str,
    c: int,
    cand: float,
    base: float,
    low: float,
    high: float,
    winner: str,
    conf: float = 0.975,
    bound: float | None = None,
) -> LevelComparison:
    return LevelComparison(
        workload=wl,
        concurrency=c,
        baseline_mean=base,
        candidate_mean=cand,
        delta_pct=(cand / base - 1) * 100,
        ci_low_pct=low,
        ci_high_pct=high,
        loss_bound_pct=bound if bound is not None else low + 1.0,
        level_confidence=conf,
        n_baseline=3,
        n_candidate=3,
        winner=winner,
    )  # type: ignore[arg-type]


def exp_of(name: str, levels: list[LevelComparison], kind: str, reason: str, **kw: object) -> ExperimentView:
    v = Verdict(
        kind=kind,
        reason=reason,
        levels=levels,
        min_effect_pct=M,  # type: ignore[arg-type]
        notes=[
            "node noise single_stream 1.5% (df 3), parallel 1.6% (df 3 between launches, 21 within) "
            "from 4 launches (workloads share each launch's offset: r >= 0.99)"
        ],
        effects=[WorkloadEffect(workload="parallel", delta_pct=0, low_pct=0, high_pct=0, se_log=0.01, noise_pct=1.6)],
    )
    rows = [
        LevelRow(
            workload=c.workload,
            concurrency=c.concurrency,
            baseline=c.baseline_mean,
            candidate=c.candidate_mean,
            comparison=c,
        )
        for c in levels
    ]
    return ExperimentView(
        id=f"camp/{name}",
        hypothesis=name,
        verdict=v,
        rows=rows,
        repeats=3,
        config_diff=[ConfigChange(kind="flag", key="cuda-graph-max-bs", before=512, after=128, change="changed")],
        **kw,
    )  # type: ignore[arg-type]


def smaller_graph(adopted: bool = False, adopt_if_win: bool = False) -> ExperimentView:
    """The issue's case: a tie at the headline level (single_stream C=1, +8.6%), the win
    at parallel C=70 (+9.4%, an interval asymmetric in % as a log-scale one is)."""
    return exp_of(
        "smaller-cuda-graph",
        [
            level("single_stream", 1, 88.9, 81.9, -1.2, +19.4, "tie"),
            level("parallel", 1, 82.6, 76.5, -0.9, +17.8, "tie"),
            level("parallel", 70, 578.3, 528.6, +3.6, +15.5, "candidate"),
            level("parallel", 250, 594.0, 561.6, -2.1, +14.2, "tie", bound=-1.4),
        ],
        "win",
        "wins parallel at C=70 (+9.4%); no significant difference elsewhere",
        adopted=adopted,
        adopt_if_win=adopt_if_win,
    )


def custom_allreduce() -> ExperimentView:
    return exp_of(
        "custom-allreduce-pcie",
        [level("single_stream", 1, 39.4, 88.5, -58.9, -51.8, "baseline")],
        "dead_end",
        "slower: loses single_stream (-55.5%)",
    )


def view_of(*exps: ExperimentView) -> CampaignView:
    return CampaignView(
        id="camp",
        name="camp",
        status="finished",
        experiments=list(exps),
        min_effect_pct=M,
        headline_workload="single_stream",
    )


def section(doc: str, title: str) -> list[str]:
    start = doc.index(f"### {title}")
    return doc[start : doc.index("<!-- notes:", start)].splitlines()


def rows_of(lines: list[str], workload: str) -> list[list[str]]:
    text = "\n".join(lines).split(f"**Workload {workload}**")[1].split("**Workload")[0]
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows]


def test_the_section_opens_with_what_it_tried_what_decided_and_what_next() -> None:
    doc = render_journal(view_of(smaller_graph(adopted=True, adopt_if_win=True)))
    lines = [ln for ln in section(doc, "1. smaller-cuda-graph") if ln.strip()]
    assert lines[1] == "- **Tried:** `--cuda-graph-max-bs 128` (was 512)"
    assert lines[2] == (
        "- **Decided:** WIN: +9.4% faster \\[+3.6%, +15.5%\\] at parallel C=70, above the +3.0% bar "
        "(needed: whole interval above +3.0%); no level lost more than 3% "
        "(lowest bound -1.4% at parallel C=250)"
    )
    assert lines[3] == "- **Next:** adopted: every later experiment's baseline includes it"
    # the statistics are folded beneath, with the noise in plain words on the fold
    body = "\n".join(lines)
    folded = body[body.index("<details>") : body.index("</details>")]
    assert "run-to-run noise of one server launch: parallel 1.6%" in folded.splitlines()[0]
    assert "r >= 0.99" in folded and body.count("r >= 0.99") == 1


def test_a_table_states_the_confidence_its_rows_use_and_the_intervals_true_ends() -> None:
    lines = section(render_journal(view_of(smaller_graph())), "1. smaller-cuda-graph")
    head, _, *rows = rows_of(lines, "parallel")
    # Holm's level, the rows' own: not Bonferroni's 1 - 0.05 / 4 = 98.75%
    assert head == [
        "C",
        "candidate (tok/s)",
        "baseline (tok/s)",
        "change",
        "interval (97.5% confidence)",
        "no worse than (95% one-sided)",
        "winner",
    ]
    assert rows[1] == ["70", "578.3", "528.6", "+9.4%", "[+3.6%, +15.5%]", "+4.6%", "candidate"]
    assert "±" not in "\n".join(lines)
    assert (
        "A level counts as won when its whole interval lies above +3.0% (candidate) or below -3.0% (baseline)"
    ) in "\n".join(lines)


def test_rows_drawn_at_different_levels_each_state_theirs() -> None:
    exp = smaller_graph()
    rows = [
        r.model_copy(update={"comparison": r.comparison.model_copy(update={"level_confidence": 0.99})})
        if r.concurrency == 250 and r.comparison
        else r
        for r in exp.rows
    ]
    lines = section(render_journal(view_of(exp.model_copy(update={"rows": rows}))), "1. smaller-cuda-graph")
    head, _, *par = rows_of(lines, "parallel")
    assert head[4] == "interval (confidence)"
    assert par[1][4] == "[+3.6%, +15.5%] at 97.5%" and par[2][4] == "[-2.1%, +14.2%] at 99%"


def test_a_loss_reads_as_the_candidates_change_never_the_baselines_lead() -> None:
    doc = render_journal(view_of(custom_allreduce()))
    lines = section(doc, "1. custom-allreduce-pcie")
    assert lines[3] == (
        "- **Decided:** DEAD END: -55.5% slower \\[-58.9%, -51.8%\\] at single_stream C=1, below the "
        "-3.0% bar (needed: whole interval below -3.0%)"
    )
    (_, _, row) = rows_of(lines, "single_stream")
    assert row[3:5] == ["-55.5%", "[-58.9%, -51.8%]"] and row[6] == "baseline"
    assert "+124" not in doc  # the baseline's lead over the candidate, a flipped sign


def test_the_scoreboard_shows_the_deciding_level_not_the_headline() -> None:
    doc = render_journal(view_of(smaller_graph(), custom_allreduce()))
    board = doc[doc.index("## Scoreboard") : doc.index("## Experiments")]
    assert "| deciding level: candidate vs baseline | change [interval] |" in board
    assert "| WIN | 578.3 vs 528.6 tok/s (parallel C=70) | +9.4% [+3.6%, +15.5%] |" in board
    assert "| DEAD END (slower) | 39.4 vs 88.5 tok/s (single_stream C=1) | -55.5% [-58.9%, -51.8%] |" in board
    assert "+8.6%" not in board  # the tie at the headline level decided nothing


def test_a_win_that_was_not_adopted_says_why() -> None:
    lines = section(render_journal(view_of(smaller_graph())), "1. smaller-cuda-graph")
    nxt = next(ln for ln in lines if ln.startswith("- **Next:**"))
    assert nxt.startswith("- **Next:** not adopted: the playbook does not set adopt_if_win for this hypothesis")


def test_show_json_gives_the_same_deciding_level_interval_and_bar() -> None:
    doc = show_json(view_of(smaller_graph(), custom_allreduce()))
    win, loss = doc["experiments"]
    assert doc["min_effect_pct"] == M
    assert win["deciding_level"] == {
        "workload": "parallel",
        "concurrency": 70,
        "candidate": 578.3,
        "baseline": 528.6,
        "delta_pct": win["metrics"]["parallel"]["70"]["delta_pct"],
        "low_pct": 3.6,
        "high_pct": 15.5,
        "confidence": 0.975,
        "min_effect_pct": M,
        "needed": "whole interval above +3.0%",
        "text": "+9.4% faster [+3.6%, +15.5%] at parallel C=70",
    }
    assert win["decided"].startswith("WIN: +9.4% faster [+3.6%, +15.5%] at parallel C=70, above the +3.0% bar")
    assert win["next"].startswith("not adopted: the playbook does not set adopt_if_win")
    assert (
        win["metrics"]["parallel"]["70"]["low_pct"] == 3.6 and win["metrics"]["parallel"]["70"]["winner"] == "candidate"
    )
    assert loss["deciding_level"]["text"] == "-55.5% slower [-58.9%, -51.8%] at single_stream C=1"
    assert loss["deciding_level"]["needed"] == "whole interval below -3.0%"


def test_plot_labels_are_the_candidates_signed_change() -> None:
    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for exp, want in ((smaller_graph(), ["+9%"]), (custom_allreduce(), ["-55%"])):
        ax.clear()
        texts = [a.text for a in _level_data(ax, exp.rows) if hasattr(a, "text") and isinstance(a.text, str)]
        assert texts == want
        assert not any(re.match(r"[BC] ", t) for t in texts)


def test_a_dead_end_says_when_it_is_tried_again_and_when_it_was() -> None:
    from campaign.domain.records import DeadEnd
    from tests.campaign.seed_campaign import fingerprint

    exp = custom_allreduce()
    assert exp.verdict is not None
    exp = exp.model_copy(
        update={"environment": fingerprint("12.8"), "verdict": exp.verdict.model_copy(update={"revisit_on": ["cuda"]})}
    )
    waiting = section(render_journal(view_of(exp)), "1. custom-allreduce-pcie")
    assert "- **Next:** dead end: retried only when cuda changes (it ran on cuda 12.8)" in waiting
    dead = DeadEnd(hypothesis=exp.hypothesis, experiment_id=exp.id, reason="slower", revisit_on=["cuda"], reopened=True)
    reopened = view_of(exp).model_copy(update={"dead_ends": [dead]})
    lines = section(render_journal(reopened), "1. custom-allreduce-pcie")
    assert "- **Next:** re-opened: its revisit condition (cuda changes) holds now, so it is tested again" in lines
