"""The journal's level table shows the figures the verdict compared.  On the real vLLM CPU
node a baseline launch ran at 19 tok/s where the others ran ~55; the stall screen left it
out of the comparison (+4.6%), but the table beside it showed the raw means of every
launch (59.0 against 44.1 tok/s), and at C=16 its winner column read "baseline (+24.1%)"
where the comparison had measured -32.5%.  Real SQLite, the real analysis (`judge`) on a node with a history."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from campaign.domain.models import EffectiveConfig
from campaign.journal.render import render_journal
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.store import Store
from campaign.verdict.judge import judge
from tests.campaign.verdict.test_launches import SPEC, SWEEP, _history, _samples

PLAYBOOK = {"name": "stalled", "workloads": {"single_stream": {"concurrency": [1]}, "parallel": {"concurrency": SWEEP}}}


def _rows(doc: str, workload: str) -> list[list[str]]:
    block = doc.split(f"**Workload {workload}**")[1].split("\n\n", 2)[1]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in block.splitlines()[2:]]


def test_the_level_table_shows_what_the_verdict_compared(tmp_path: Path) -> None:
    rng = random.Random(5)
    noise = _history(rng)
    samples = _samples(rng, 3, lambda c: 8.0 if c <= 2 else -8.0)  # wins the low levels, loses the rest
    stalled = {}
    for ls in samples:  # the first baseline launch ran at a third of its speed everywhere
        first = ls.baseline[0]
        stalled[(ls.workload, ls.concurrency)] = first.output_tokens_per_s / 3
        ls.baseline[0] = first.model_copy(update={"output_tokens_per_s": stalled[(ls.workload, ls.concurrency)]})
    pb = Playbook.model_validate(PLAYBOOK)
    store = Store(tmp_path / "campaign.db")
    cid = store.create_campaign(pb.name, playbook=pb.model_dump(mode="json"), node="lab").id
    store.upsert_hypothesis(cid, HypothesisSpec(name="split", flags={"max-num-seqs": 4}))
    exp = store.start_experiment(cid, "split", config=EffectiveConfig(flags={"max-num-seqs": 4}), node="lab")
    for ls in samples:
        for side in ("candidate", "baseline"):
            for rep, lv in enumerate(getattr(ls, side)):
                store.record_run(exp.id, side, rep, ls.workload, lv, work="w", node="lab")
    v = judge(store.level_samples(exp.id), SPEC, noise, primary_workload="single_stream")
    assert v.kind == "dead_end" and sum(e.stalled_baseline for e in v.effects) >= 1, (v.reason, v.noise)
    store.record_verdict(exp.id, v)
    store.finish_experiment(exp.id, node_seconds=60.0)

    doc = render_journal(store.view(cid))
    rows = _rows(doc, "parallel")
    assert [int(r[0]) for r in rows] == SWEEP
    by_c = {lc.concurrency: lc for lc in v.levels if lc.workload == "parallel"}
    for r in rows:
        cand, base, shown, winner = float(r[1]), float(r[2]), r[3], r[6]
        lc = by_c[int(r[0])]
        assert base > 1.5 * stalled[("parallel", lc.concurrency)], r  # not pulled down by the stall
        m = re.fullmatch(r"([+-]\d+\.\d)%", shown)
        assert m and winner == lc.winner, r
        # the row's own figures give the candidate's change the table states
        assert float(m[1]) == pytest.approx((cand / base - 1) * 100, abs=0.15), r
    after_table = doc.split("**Workload parallel**")[1].split("\n**")[0]
    assert "Stalls the screen left out of this comparison: " in after_table
