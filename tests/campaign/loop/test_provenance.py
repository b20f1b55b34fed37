"""Workload provenance: each verdict says what work both sides did, flags launches of
different work, and explains why two workloads disagree (accept length), from a real SQLite store."""

from __future__ import annotations

import json

from campaign.domain.models import EffectiveConfig, LevelResult
from campaign.loop.experiment import provenance_notes
from campaign.playbook.schema import Playbook
from campaign.store import Store

PB = Playbook.model_validate(
    {
        "name": "p",
        "workloads": {
            "single_stream": {"concurrency": [1], "prompts": "fixed", "output_tokens": 128},
            "parallel": {"concurrency": [1, 10], "prompts": "diverse", "output_tokens": 128},
        },
    }
)


def _exp(tmp_path, cand_hash="d1"):
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("p", playbook=PB).id
    eid = store.start_experiment(cid, "eagle3", config=EffectiveConfig(), attempt=1).id
    for side, h in (("candidate", cand_hash), ("baseline", "d1")):
        store.record_side(
            eid,
            side,
            0,
            [
                ("single_stream", LevelResult(concurrency=1, requests=1), "f1"),
                ("parallel", LevelResult(concurrency=1, requests=1), h),
                ("parallel", LevelResult(concurrency=10, requests=10), h),
            ],
        )
    store.record_launch_artifact(
        eid,
        "server_stats",
        json.dumps({"single_stream": {"spec_accept_length": 3.4}, "parallel": {"spec_accept_length": 1.9}}),
        side="candidate",
        repeat=0,
    )
    return store, eid


def test_disagreeing_workloads_are_explained_by_accept_length(tmp_path):
    store, eid = _exp(tmp_path)
    notes = provenance_notes(store, eid, PB, {"single_stream": "candidate", "parallel": "baseline"})
    assert notes[0].startswith("workload single_stream: prompts fixed (work f1)")
    assert "C=1,10" in notes[1] and "prompts diverse (work d1)" in notes[1]
    # the server's own figure, named as the server names it: no engine's story in the core
    assert notes[-1] == (
        "the workloads disagree; the server reported spec_accept_length 3.40 on single_stream "
        "(prompts fixed) vs 1.90 on parallel (prompts diverse)"
    )
    assert "speculation" not in " ".join(notes)


def test_agreeing_workloads_need_no_explanation_and_different_work_is_flagged(tmp_path):
    store, eid = _exp(tmp_path, cand_hash="OTHER")
    notes = provenance_notes(store, eid, PB, {"single_stream": "baseline", "parallel": "baseline"})
    assert not any("accept length" in n for n in notes)
    assert (
        "workload parallel: the launches compared did not all do the same work (prompts, their order, "
        "request counts, output tokens or endpoint)"
    ) in notes
