"""Which planner runs: the queue by default and whenever no endpoint is configured."""

from __future__ import annotations

import subprocess
import sys

import pytest

from campaign.domain.errors import UserError
from campaign.planner import NO_ENDPOINT, QueuePlanner, resolve_endpoint, select_planner
from campaign.planner.base import Planner
from campaign.planner.llm import LlmPlanner
from tests.campaign.planner.conftest import make_ctx, make_playbook
from tests.fake_openai import FakeOpenAI


def test_queue_planner_returns_the_first_untried_then_is_exhausted() -> None:
    ctx = make_ctx(tried=["nccl-tree", "nccl-ring"])
    out = QueuePlanner().propose(ctx)
    assert out.hypothesis is not None and out.hypothesis.name == "cg-bs-256" and out.source == "playbook"
    ctx = make_ctx(tried=["nccl-ring", "cg-bs-256"])
    out = QueuePlanner().propose(ctx)
    assert out.hypothesis is None and out.exhausted and out.note == "playbook queue is empty"
    assert QueuePlanner().analyze(ctx, ctx.view.experiments[0]).text is None
    assert QueuePlanner().triage(["x"]).failure_class is None


def test_queue_planner_puts_a_reopened_dead_end_back() -> None:
    pb = make_playbook()
    ctx = make_ctx(playbook=pb, queue=[pb.hypotheses[0]], tried=["nccl-ring"], reopened=["nccl-ring"])
    out = QueuePlanner().propose(ctx)
    assert out.hypothesis is not None and out.hypothesis.name == "nccl-ring"


def test_select_planner() -> None:
    pb = make_playbook()
    planner, notice = select_planner(pb, {})
    assert isinstance(planner, QueuePlanner) and notice == NO_ENDPOINT
    planner, notice = select_planner(pb, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert isinstance(planner, LlmPlanner) and notice is None and isinstance(planner, Planner)
    assert str(planner.client.base_url).startswith("http://127.0.0.1:9/v1")
    assert planner.client.max_retries == 2 and planner.client.timeout == 5
    planner, _ = select_planner(
        pb.model_copy(update={"planner": pb.planner.model_copy(update={"kind": "queue"})}), {"OPENAI_API_KEY": "k"}
    )
    assert isinstance(planner, QueuePlanner)


def test_resolve_endpoint_prefers_the_playbook_but_keeps_the_environments_key_for_its_own_endpoint() -> None:
    spec = make_playbook(base_url="https://gpu-box:8000/v1").planner
    env = {"OPENAI_BASE_URL": "https://other/v1", "OPENAI_API_KEY": "k"}
    assert resolve_endpoint(spec, env) == ("https://gpu-box:8000/v1", None)
    assert resolve_endpoint(spec, {**env, "OPENAI_BASE_URL": "https://gpu-box:8000/v1/"}) == (
        "https://gpu-box:8000/v1",
        "k",
    )
    named = spec.model_copy(update={"api_key_env": "GPU_BOX_KEY"})
    assert resolve_endpoint(named, {**env, "GPU_BOX_KEY": "g"}) == ("https://gpu-box:8000/v1", "g")
    with pytest.raises(UserError, match=r"planner.api_key_env: GPU_BOX_KEY is not set \(fix: export GPU_BOX_KEY="):
        resolve_endpoint(named, env)


@pytest.mark.parametrize("url", ["http://gpu-box:8000/v1", "http://10.0.0.7/v1"])
def test_a_key_is_never_sent_in_clear_text_off_this_machine(url: str) -> None:
    spec = make_playbook(base_url=url, api_key_env="OPENAI_API_KEY").planner
    with pytest.raises(UserError, match=r"planner.base_url: http://.* would get the planner's API key in clear text"):
        resolve_endpoint(spec, {"OPENAI_API_KEY": "k"})
    with pytest.raises(UserError, match=r"^OPENAI_BASE_URL: http://"):
        resolve_endpoint(make_playbook().planner, {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "k"})
    for here in ("http://127.0.0.1:9/v1", "http://localhost:9/v1", "http://[::1]:9/v1"):
        assert resolve_endpoint(make_playbook().planner, {"OPENAI_BASE_URL": here, "OPENAI_API_KEY": "k"})[1] == "k"


def test_a_keyless_local_endpoint_works(server: FakeOpenAI) -> None:
    from tests.fake_openai import proposal

    server.script(proposal("fa3", flags={"attention-backend": "fa3"}))
    planner, _ = select_planner(make_playbook(), {"OPENAI_BASE_URL": server.url})
    assert planner.propose(make_ctx()).hypothesis is not None
    assert server.chat_requests()[0].headers["Authorization"] == "Bearer no-key"


def test_importing_the_package_does_not_import_openai() -> None:
    code = "import sys, campaign.planner; print('openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_run_and_validate_refuse_a_clear_text_key_before_anything_is_recorded(tmp_path, monkeypatch) -> None:
    from tests.campaign.sim_playbook import campaign_cli, tiny_playbook, write_playbook

    data = tiny_playbook(tmp_path, "planner-http", [])
    data["planner"] = {"kind": "llm", "base_url": "http://gpu-box:8000/v1", "api_key_env": "GPU_BOX_KEY"}
    pb = write_playbook(tmp_path / "pb.yaml", data)
    monkeypatch.setenv("GPU_BOX_KEY", "sk-" + "z" * 24)
    for command in ("validate", "run"):
        res = campaign_cli(tmp_path, command, str(pb), timeout=120)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        (line,) = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert "planner.base_url: http://gpu-box would get the planner's API key in clear text" in line
        assert "z" * 24 not in res.stdout + res.stderr
    assert not (tmp_path / "state").exists()
