"""The noise model's read (`Store.side_values`) decodes each run side once and never
serves a stale value: a side still being written gains levels, and the read follows."""

from __future__ import annotations

from pathlib import Path

from campaign.domain.models import EffectiveConfig, LevelResult
from campaign.store import Store

PLAYBOOK = {"name": "demo", "workloads": {"single_stream": {"concurrency": [1, 2]}}}


def test_a_side_that_gains_levels_is_read_again(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("demo", playbook=PLAYBOOK).id
    eid = store.start_experiment(cid, "baseline", config=EffectiveConfig(), role="baseline").id
    store.record_run(
        eid, "baseline", 0, "single_stream", LevelResult(concurrency=1, requests=2, output_tokens_per_s=10.0)
    )
    assert store.side_values([eid], "output_tokens_per_s")[eid] == [(0, "single_stream", 1, 10.0)]
    assert len(store._memo.side_values) == 1
    store.record_run(
        eid, "baseline", 0, "single_stream", LevelResult(concurrency=2, requests=4, output_tokens_per_s=20.0)
    )
    assert sorted(store.side_values([eid], "output_tokens_per_s")[eid]) == [
        (0, "single_stream", 1, 10.0),
        (0, "single_stream", 2, 20.0),
    ]
    store.side_values([eid], "output_tokens_per_s")
    assert len(store._memo.side_values) == 2  # the longer blob once more, then from the memo
    assert store.side_values([eid], "output_tokens_per_s", work={"single_stream": "other"})[eid] == []
