"""Read every record of one campaign inside one read transaction (a WAL snapshot).

Plain SQL on the transaction's sqlite3 connection (`campaign.store.plain`): the `Store`
passes its session's connection, the read-only `campaign.store.reader` its own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from functools import partial
from typing import Any

from campaign.domain.models import Fingerprint
from campaign.domain.records import Verdict
from campaign.domain.source import PatchRecord
from campaign.store import logread, tally
from campaign.store.convert import (
    campaign_record,
    experiment_record,
    hypothesis_record,
    review_record,
    verdict_detail,
    verdict_of,
)
from campaign.store.deploy import read_deploy, read_wins_not_adopted
from campaign.store.latency import latency_fields
from campaign.store.memo import ParseMemo
from campaign.store.pack import level_figures, level_values, unpack_text
from campaign.store.plain import IN_IDS, ids_param, require_campaign_row, rows
from campaign.store.view import CampaignSnapshot, Runs, light_verdict

OVERVIEW_LAST = 40  # campaign.journal.format.OVERVIEW_LAST (the store does not import the journal)


def read_runs(conn: sqlite3.Connection, ids: list[str], metric: str, latency: tuple[str, ...] = ()) -> dict[str, Runs]:
    """Every level of every round of `ids`, reduced to `metric` and the `latency` fields
    (`campaign.store.latency`), per side in round order."""
    runs: dict[str, Runs] = {i: Runs() for i in ids}
    q = f"SELECT experiment_id, side, repeat, levels FROM run_sides WHERE experiment_id {IN_IDS} ORDER BY repeat"
    for exp_id, side, repeat, blob in conn.execute(q, (ids_param(ids),)):
        if not latency:
            runs[exp_id].add(side, repeat, level_values(blob, metric))
            continue
        figures = level_figures(blob, [metric, *latency])
        runs[exp_id].add(side, repeat, [(w, c, v[0]) for w, c, v in figures])
        runs[exp_id].add_latency(side, latency, [(w, c, v[1:]) for w, c, v in figures])
    return runs


def _memo_runs(
    conn: sqlite3.Connection, ids: list[str], metric: str, latency: tuple[str, ...], memo: ParseMemo
) -> dict[str, Runs]:
    """`read_runs` through the memo: each experiment keyed by its rounds' heads (side,
    round, when recorded), read without their levels; only a new key is decoded."""
    heads: dict[str, list[tuple[str, int, float]]] = {i: [] for i in ids}
    q = f"SELECT experiment_id, side, repeat, recorded_at FROM run_sides WHERE experiment_id {IN_IDS}"
    for exp_id, side, repeat, recorded_at in conn.execute(q, (ids_param(ids),)):
        heads[exp_id].append((side, repeat, recorded_at))
    keys = {i: (i, metric, latency, tuple(sorted(h))) for i, h in heads.items()}
    out = {i: found for i in ids if (found := memo.runs.peek(keys[i])) is not None}
    missing = [i for i in ids if i not in out]
    if missing:
        for exp_id, decoded in read_runs(conn, missing, metric, latency).items():
            out[exp_id] = memo.runs.get(keys[exp_id], lambda r=decoded: r)  # type: ignore[misc]
    return out


def read_verdicts(conn: sqlite3.Connection, ids: list[str]) -> dict[str, Verdict]:
    return {
        v.experiment_id: verdict_of(verdict_detail(v))
        for v in rows(conn, f"SELECT * FROM verdicts WHERE experiment_id {IN_IDS}", (ids_param(ids),))
    }


def _read_verdicts(
    conn: sqlite3.Connection, ids: list[str], full: set[str], *, parsed: set[str], memo: ParseMemo
) -> dict[str, Verdict]:
    """Every verdict of `ids`: in full for `full`; without per-level comparisons for
    `parsed` and the dead ends (scoreboard, overview, revisit lists), decoded once per
    Store; the rest from their columns alone (their details are not even read)."""
    head = f"SELECT experiment_id, kind, reason, failure_class, recorded_at FROM verdicts WHERE experiment_id {IN_IDS}"
    verdicts: dict[str, Verdict] = {}
    decode: list[str] = []
    for exp_id, kind, reason, failure_class, recorded_at in conn.execute(head, (ids_param(ids),)):
        if exp_id not in full and (exp_id in parsed or kind == "dead_end"):
            found = memo.verdicts.peek((exp_id, recorded_at, kind))
            if found is not None:
                verdicts[exp_id] = found
                continue
        if exp_id in full or exp_id in parsed or kind == "dead_end":
            decode.append(exp_id)
        else:  # the scoreboard's marker: from the columns
            verdicts[exp_id] = memo.verdicts.get(
                (exp_id, recorded_at, kind, reason, failure_class),
                lambda: Verdict(kind=kind, reason=reason, failure_class=failure_class),
            )
    if decode:
        for v in rows(conn, f"SELECT * FROM verdicts WHERE experiment_id {IN_IDS}", (ids_param(decode),)):
            if v.experiment_id in full:
                verdicts[v.experiment_id] = verdict_of(verdict_detail(v))
            else:
                verdicts[v.experiment_id] = memo.verdicts.get(
                    (v.experiment_id, v.recorded_at, v.kind), partial(_light, v)
                )
    return verdicts


def _light(row: Any) -> Verdict:
    return light_verdict(verdict_detail(row))


def read_snapshot(
    conn: sqlite3.Connection,
    campaign_id: str,
    detail: set[str] | None = None,
    *,
    only: Collection[str] | None = None,
    window: Collection[str] | None = None,
    memo: ParseMemo | None = None,
) -> CampaignSnapshot:
    """Every record; with `detail`, runs and analyses only of those experiments and of the
    baselines (what an incremental journal update re-renders), verdicts of all (decoded
    only where shown: those, the latest, the dead ends), and the hypotheses of those
    experiments and of the dead ends (parsing every spec was a third of an update at
    1,000 experiments).  With `only`, just those experiments, the baselines they borrow
    and their hypotheses, and no reviews or events: what their own `show` pieces need, at
    the same cost at experiment 5,000 as at 10.  With `window`, the candidates in it and
    every baseline, with everything campaign-wide (reviews, events, the node time summed
    and each environment's first experiment in SQL): what a journal update shows, at the
    cost of the window.  `memo` reuses what the same Store has decoded before
    (`campaign.store.memo`)."""
    memo = memo or ParseMemo(limit=1)
    campaign = campaign_record(require_campaign_row(conn, campaign_id))
    where, params = "campaign_id = ?", [campaign_id]
    hyp_where, hyp_params = "campaign_id = ?", [campaign_id]
    if only is not None:
        chosen = rows(
            conn,
            f"SELECT id, hypothesis, baseline_ref FROM experiments WHERE campaign_id = ? AND id {IN_IDS}",
            (campaign_id, ids_param(only)),
        )
        refs = {e.baseline_ref for e in chosen if e.baseline_ref} - {e.id for e in chosen}
        where, params = f"{where} AND id {IN_IDS}", [*params, ids_param([e.id for e in chosen] + sorted(refs))]
        hyp_where, hyp_params = (
            f"{hyp_where} AND name {IN_IDS}",
            [*hyp_params, ids_param(sorted({e.hypothesis for e in chosen}))],
        )
    totals: dict[str, Any] | None = None
    if window is not None:
        where, params = f"{where} AND (id {IN_IDS} OR role = 'baseline')", [*params, ids_param(window)]
        totals = _campaign_totals(conn, campaign_id)
    experiments = rows(conn, f"SELECT * FROM experiments WHERE {where} ORDER BY started_at, id", tuple(params))
    ids = [e.id for e in experiments]
    runs: dict[str, Runs] = {}
    loaded = ids if detail is None else [e.id for e in experiments if e.id in detail or e.role == "baseline"]
    metric = str(campaign.playbook.get("verdict", {}).get("metric", "output_tokens_per_s"))
    latency = latency_fields(campaign.playbook)
    if detail is None:
        runs.update(read_runs(conn, loaded, metric, latency))
    else:  # a journal update: the baselines' rounds are final once written, decoded once per Store
        runs.update(read_runs(conn, [i for i in loaded if i in detail], metric, latency))
        runs.update(_memo_runs(conn, [i for i in loaded if i not in detail], metric, latency, memo))
    full = set(loaded)
    verdicts = _read_verdicts(conn, ids, full, parsed=full | set(ids[-OVERVIEW_LAST:]), memo=memo)
    if detail is not None:  # what the view reads a spec for: a re-rendered section, a dead end's revisit list
        wanted = {
            e.hypothesis
            for e in experiments
            if e.id in full or (e.id in verdicts and verdicts[e.id].kind == "dead_end")
        }
        hyp_where, hyp_params = f"{hyp_where} AND name {IN_IDS}", [*hyp_params, ids_param(sorted(wanted))]
    hyp_rows = rows(conn, f"SELECT * FROM hypotheses WHERE {hyp_where} ORDER BY position", tuple(hyp_params))
    artifact = f"SELECT experiment_id, content, content_z FROM artifacts WHERE experiment_id {IN_IDS} AND kind = ? ORDER BY seq"
    analyses = {
        exp_id: unpack_text(content, content_z)
        for exp_id, content, content_z in conn.execute(artifact, (ids_param(loaded), "analysis"))
    }  # the highest seq wins: a later analysis supersedes
    patches = {
        exp_id: PatchRecord.model_validate_json(unpack_text(content, content_z))
        for exp_id, content, content_z in conn.execute(artifact, (ids_param(ids), "patch"))
    }  # the tree each experiment ran from (server.source set)
    baselines = [e.id for e in experiments if e.role == "baseline"]
    work = {
        exp_id: unpack_text(content, content_z)
        for exp_id, content, content_z in conn.execute(artifact, (ids_param(baselines), "work"))
    }
    # the highest seq wins: what the baseline's last launch did ("How the baseline moved")
    fps = conn.execute(
        "SELECT id, json FROM fingerprints WHERE campaign_id = ? ORDER BY seq", (campaign_id,)
    ).fetchall()
    reviews = (
        rows(conn, "SELECT * FROM reviews WHERE campaign_id = ? ORDER BY seq", (campaign_id,)) if only is None else []
    )
    return CampaignSnapshot(
        detail=None if detail is None else full,
        campaign=campaign,
        hypotheses=[memo.hypotheses.get(tuple(h), partial(hypothesis_record, h)) for h in hyp_rows],
        experiments=[memo.experiments.get(tuple(e), partial(experiment_record, e)) for e in experiments],
        runs=runs,
        verdicts=verdicts,
        fingerprints={fp_id: Fingerprint.model_validate_json(text) for fp_id, text in fps},
        latest_fingerprint_id=fps[-1][0] if fps else None,
        analyses=analyses,
        patches=patches,
        work=work,
        reviews=[review_record(r) for r in reviews],
        events=logread.events(conn, campaign_id) if only is None else [],
        planner_cost=logread.planner_cost(conn, campaign_id) if only is None else {},
        planner_calls=logread.planner_calls(conn, campaign_id) if only is None else [],
        totals=totals,
        node_seconds=tally.current(conn, campaign_id).node_seconds,
        deploy=read_deploy(conn, campaign_id) if only is None else None,
        wins_not_adopted=read_wins_not_adopted(conn, campaign_id) if only is None else [],
    )


def _campaign_totals(conn: sqlite3.Connection, campaign_id: str) -> dict[str, Any]:
    """What a view of a window still shows of the whole campaign: the first candidate of
    each environment (`same as experiment N`).  Aggregated in SQL: no row reaches Python
    per experiment."""
    first = conn.execute(
        "SELECT fingerprint_id, id FROM (SELECT fingerprint_id, id, row_number() OVER "
        "(PARTITION BY fingerprint_id ORDER BY started_at, id) AS n FROM experiments WHERE campaign_id = ? "
        "AND role = 'candidate' AND fingerprint_id IS NOT NULL) AS firsts WHERE n = 1",
        (campaign_id,),
    )
    return {"environment_first": {r[0]: r[1] for r in first}}


__all__ = ["read_runs", "read_snapshot", "read_verdicts"]
