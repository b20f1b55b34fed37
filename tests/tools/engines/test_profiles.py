"""Engine profiles: registry, command rendering, environment merging, setup env file."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.domain.models import EffectiveConfig
from tools.engines import ENGINES, engine_profile, read_vllm_setup

NGRAM = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3,"prompt_lookup_min":1}'


def test_registry_knows_every_shipped_playbook_engine() -> None:
    from pathlib import Path

    from campaign.playbook.load import load_playbook

    root = Path(__file__).resolve().parents[3]
    used = {load_playbook(p).server.engine for p in (root / "playbooks").glob("*.yaml")}
    assert used <= set(ENGINES) and {"simulated", "vllm"} <= used
    with pytest.raises(UserError, match="server.engine: unknown engine 'trt'"):
        engine_profile("trt")


def test_vllm_command_renders_one_argv_item_per_value() -> None:
    cfg = EffectiveConfig(flags={"max-num-seqs": 4, "speculative-config": NGRAM, "enable-chunked-prefill": True,
                                 "enforce-eager": False})
    argv = engine_profile("vllm").argv(cfg, python="/venv/bin/python", model="/m/medium llama", port=8123)
    assert argv[:3] == ["/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--model") + 1] == "/m/medium llama"
    assert argv[argv.index("--port") + 1] == "8123" and argv[argv.index("--dtype") + 1] == "float32"
    assert argv[argv.index("--speculative-config") + 1] == NGRAM
    assert "--enable-chunked-prefill" in argv and "--enforce-eager" not in argv
    assert argv[argv.index("--max-num-seqs") + 1] == "4"


def test_sglang_command() -> None:
    argv = engine_profile("sglang").argv(EffectiveConfig(flags={"tp": 8}), python="python3", model="glm",
                                         port=30000, host="0.0.0.0")
    assert argv == ["python3", "-m", "sglang.launch_server", "--model-path", "glm", "--host", "0.0.0.0",
                    "--port", "30000", "--tp", "8"]


def test_launch_request_expects_the_model_and_layers_env() -> None:
    cfg = EffectiveConfig(env={"VLLM_CPU_KVCACHE_SPACE": "2"})
    req = engine_profile("vllm").launch_request(cfg, python="py", model="mdl", port=9000, log_path="/tmp/x.log",
                                                env={"VLLM_CACHE_ROOT": "/c", "VLLM_CPU_KVCACHE_SPACE": "8"})
    assert req.expect_model == "mdl" and req.health_path == "/health" and req.port == 9000
    assert req.env["VLLM_CPU_KVCACHE_SPACE"] == "2"  # the config under test wins
    assert req.env["VLLM_CACHE_ROOT"] == "/c" and req.env["HF_HUB_OFFLINE"] == "1"
    assert req.env["VLLM_HOST_IP"] == "127.0.0.1"


def test_read_vllm_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAMPAIGN_VLLM_ENV", raising=False)
    assert read_vllm_setup(tmp_path) is None
    py = tmp_path / "venv/bin/python"
    py.parent.mkdir(parents=True)
    py.write_text("")
    for size in ("medium", "tiny"):
        (tmp_path / f"models/{size}-llama").mkdir(parents=True)
    env = tmp_path / ".campaign/vllm.env"
    env.parent.mkdir()
    env.write_text(f"# written by setup\nCAMPAIGN_VLLM_PYTHON={py}\nCAMPAIGN_VLLM_MODEL_MEDIUM={tmp_path}/models/"
                   f"medium-llama\nCAMPAIGN_VLLM_MODEL_TINY={tmp_path}/models/tiny-llama\n")
    assert read_vllm_setup(tmp_path) is None  # models without config.json: not built
    for size in ("medium", "tiny"):
        (tmp_path / f"models/{size}-llama/config.json").write_text("{}")
    setup = read_vllm_setup(tmp_path)
    assert setup is not None and setup.python == str(py)
    assert setup.cache_root == str(tmp_path / ".campaign/vllm-cache")
    monkeypatch.setenv("CAMPAIGN_VLLM_ENV", str(tmp_path / "elsewhere.env"))
    assert read_vllm_setup(tmp_path) is None


def test_reported_config_in_the_command_lines_spelling_with_secrets_masked() -> None:
    from tools.engines.base import EngineMetrics
    from tools.engines.simulated import PROFILE as SIM

    metrics = EngineMetrics(engine="simulated", server_args={
        "flags": {"cuda_graph_max_bs": 128, "api_key": "sk-abcdefghijklmnopqrstuv", "speculative_config": {"k": 2}},
        "env": {"HF_TOKEN": "hf_abcdefghijklmnopqrstuv", "NCCL_ALGO": "Tree"}})
    rep = SIM.reported_config(metrics)
    assert rep is not None
    assert rep.flags == {"cuda-graph-max-bs": 128, "api-key": "***", "speculative-config": '{"k":2}'}
    assert rep.env == {"HF_TOKEN": "***", "NCCL_ALGO": "Tree"}
    assert rep.derived_from["speculative-num-steps"] == ["speculative-algorithm"]
    assert SIM.reported_config(EngineMetrics(engine="simulated")) is None  # nothing reported: no claim
