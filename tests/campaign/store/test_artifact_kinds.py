"""Every artifact the loop writes is a kind the store accepts: a kind missing from the
store's list only fails on the node kind that produces it (Slurm's queue wait)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from campaign.domain.measurement import Measurement
from campaign.domain.models import EffectiveConfig, Failure, FailureClass
from campaign.loop.experiment import finish_recorded, record_measurement
from campaign.ports.records import ArtifactKind, ExperimentArtifactKind, LaunchArtifactKind, LaunchTimeKind
from campaign.store import Store

PLAYBOOK = {"name": "demo", "workloads": {"single_stream": {"concurrency": [1]}}}


def test_every_kind_of_the_port_is_accepted_by_the_store(tmp_path: Path) -> None:
    """mypy holds the core's writes to the port's kinds; the store must accept each of
    them, launch kinds by (side, repeat), the others by seq."""
    launch, times, experiment = (set(get_args(k)) for k in (LaunchArtifactKind, LaunchTimeKind, ExperimentArtifactKind))
    assert launch | times | experiment == set(get_args(ArtifactKind))
    assert not (launch & times or launch & experiment or times & experiment)
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("demo", playbook=PLAYBOOK, node="local").id
    eid = store.start_experiment(cid, "h", config=EffectiveConfig(flags={}, env={})).id
    for kind in sorted(launch):
        assert store.record_launch_artifact(eid, kind, f"{kind} text", side="candidate", repeat=1)
        assert store.launch_artifact(eid, kind, side="candidate", repeat=1) == f"{kind} text"
    for kind in sorted(experiment):
        assert store.record_artifact(eid, kind, f"{kind} text")
        assert store.get_artifact(eid, kind) == f"{kind} text"


def test_a_slurm_measurement_records_its_queue_wait_apart_from_node_time(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("demo", playbook=PLAYBOOK, node="slurm-0").id
    exp = store.start_experiment(cid, "h", config=EffectiveConfig(flags={}, env={}))
    m = Measurement(
        command="serve",
        node_seconds=12.5,
        wall_seconds=40.0,
        queue_seconds=27.5,
        failure=Failure(failure_class=FailureClass.health_timeout, summary="no answer"),
    )
    record_measurement(store, exp.id, "candidate", 0, m, "slurm-0")
    record_measurement(store, exp.id, "candidate", 0, m, "slurm-0")  # a resumed node writes it again
    finish_recorded(store, exp.id)
    done = store.get_experiment(exp.id)
    assert (done.queue_seconds, done.node_seconds) == (27.5, 12.5)


def test_a_long_patch_record_reads_back_from_the_packed_column(tmp_path: Path) -> None:
    """Text over PACK_TEXT_FROM is stored compressed; every reader must unpack it."""
    from campaign.domain.source import PatchRecord
    from campaign.store.pack import PACK_TEXT_FROM

    store = Store(tmp_path / "c.db")
    cid = store.create_campaign("demo", playbook=PLAYBOOK, node="local").id
    exp = store.start_experiment(cid, "h", config=EffectiveConfig(flags={}, env={}))
    diff = "diff --git a/x.py b/x.py\n" + "+faster = True\n" * 40
    rec = PatchRecord(sha="b" * 40, base="a" * 40, branch=f"campaign/{cid}/h", files=["x.py"], diff=diff)
    assert len(rec.model_dump_json()) > PACK_TEXT_FROM
    store.record_artifact(exp.id, "patch", rec.model_dump_json())
    view = store.view(cid)
    assert [e.patch for e in view.experiments if e.id == exp.id] == [rec]
