"""The configuration to deploy: the baseline plus the adopted wins, as the exact command
the node launched it with (read from the record, env first), in the journal's header and
`show --json`; every WIN left out says why.  The cached `show --json` head follows."""

from __future__ import annotations

import json

from campaign.domain.models import EffectiveConfig, LevelResult
from campaign.journal.render import render_journal
from campaign.playbook.schema import HypothesisSpec, Playbook, VerdictSpec
from campaign.store import Store
from campaign.verdict.rule import compare_levels, decide

PLAYBOOK = {"name": "deploy", "workloads": {"single_stream": {"concurrency": [1]}}}
LAUNCH = "python -m sglang.launch_server --host 127.0.0.1 --port {port} --tp 8{flags}"


def _measure(store: Store, exp_id: str, sides: dict[str, float], flags: dict[str, str]) -> None:
    """Three interleaved repeats a side, each with the command its launch ran."""
    for rep in range(3):
        for side, value in sides.items():
            store.record_run(
                exp_id,
                side,
                rep,
                "single_stream",
                LevelResult(concurrency=1, requests=12, output_tokens_per_s=value * (1 + 0.002 * (rep - 1))),
                work="w",
                node="n",
            )
            shown = flags if side == "candidate" else {}
            cmd = LAUNCH.format(
                port=30000 + 2 * rep + (side == "candidate"), flags="".join(f" --{k} {v}" for k, v in shown.items())
            )
            store.record_launch_artifact(exp_id, "command", cmd, side=side, repeat=rep)


def _win(
    store: Store, cid: str, name: str, base_id: str, gain: float, *, adopt: bool, env: dict[str, str] | None = None
) -> str:
    flags = {name: "1"}
    store.upsert_hypothesis(cid, HypothesisSpec(name=name, flags=flags, env=env or {}, adopt_if_win=adopt))
    exp = store.start_experiment(
        cid, name, config=EffectiveConfig(flags=flags, env=env or {}), node="n", baseline_ref=base_id
    )
    _measure(store, exp.id, {"baseline": 80.0, "candidate": 80.0 * (1 + gain)}, flags)
    spec = VerdictSpec()
    v = decide(compare_levels(store.level_samples(exp.id), spec), spec)
    assert v.kind == "win", v.reason
    store.record_verdict(exp.id, v)
    store.finish_experiment(exp.id, node_seconds=60.0)
    if adopt:
        store.set_adopted(exp.id, True)
    return exp.id


def test_deploy_is_the_newest_baseline_or_adopted_win_as_launched(backend_db: str) -> None:
    pb = Playbook.model_validate(PLAYBOOK)
    store = Store(backend_db)
    cid = store.create_campaign(pb.name, playbook=pb.model_dump(mode="json"), node="n").id
    assert store.view(cid).deploy is None  # nothing measured: nothing to deploy
    base = store.start_experiment(cid, "baseline", role="baseline", config=EffectiveConfig(), node="n")
    _measure(store, base.id, {"baseline": 80.0}, {})
    store.finish_experiment(base.id, node_seconds=10.0)
    store.update_campaign(cid, baseline_experiment_id=base.id)
    first = store.view(cid).deploy
    assert first is not None and first.experiment_id == base.id and first.adopted == []
    assert first.command == LAUNCH.format(port=30004, flags="")  # the last launch of the baseline side

    won = _win(store, cid, "graphs", base.id, 0.10, adopt=True, env={"NCCL_ALGO": "Tree"})
    _win(store, cid, "fusion", base.id, 0.12, adopt=False)
    view = store.view(cid)
    assert view.deploy is not None and view.deploy.experiment_id == won  # its new baseline is not measured yet
    assert view.deploy.command == "NCCL_ALGO=Tree " + LAUNCH.format(port=30005, flags=" --graphs 1")
    assert view.deploy.adopted == ["graphs"]
    (left,) = view.wins_not_adopted
    assert left.hypothesis == "fusion" and left.why.startswith("not adopted: the playbook does not set adopt_if_win")

    doc = render_journal(view)
    head = doc[: doc.index("## Notes")]
    assert "**Configuration to deploy**: the baseline plus adopted graphs" in head
    assert f"```sh\nNCCL_ALGO=Tree {LAUNCH.format(port=30005, flags=' --graphs 1')}\n```" in head
    assert "- fusion (" in head and "not adopted: the playbook does not set adopt_if_win" in head

    data = store.show_json(cid)
    assert data["deploy"]["command"] == view.deploy.command and data["wins_not_adopted"][0]["hypothesis"] == "fusion"


def test_the_cached_show_head_follows_a_new_win(backend_db: str) -> None:
    pb = Playbook.model_validate(PLAYBOOK)
    store = Store(backend_db)
    cid = store.create_campaign(pb.name, playbook=pb.model_dump(mode="json"), node="n").id
    base = store.start_experiment(cid, "baseline", role="baseline", config=EffectiveConfig(), node="n")
    _measure(store, base.id, {"baseline": 80.0}, {})
    store.finish_experiment(base.id, node_seconds=10.0)
    store.update_campaign(cid, baseline_experiment_id=base.id)
    store.refresh_show_cache(cid)
    assert json.loads("".join(store.show_json_text(cid)))["wins_not_adopted"] == []
    _win(store, cid, "fusion", base.id, 0.12, adopt=False)
    streamed = json.loads("".join(store.show_json_text(cid)))
    assert [w["hypothesis"] for w in streamed["wins_not_adopted"]] == ["fusion"]
