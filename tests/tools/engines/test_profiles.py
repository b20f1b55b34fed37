"""Engine profiles: registry, command rendering, environment merging, setup env file."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.domain.models import EffectiveConfig
from tools.engines import ENGINES, engine_profile, read_vllm_setup
from tools.engines.launch_spec import build_launch

NGRAM = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3,"prompt_lookup_min":1}'


def test_registry_knows_every_shipped_playbook_engine() -> None:
    from pathlib import Path

    from campaign.playbook.load import load_playbook

    root = Path(__file__).resolve().parents[3]
    used = {load_playbook(p).server.engine for p in (root / "playbooks").glob("*.yaml")}
    assert used <= set(ENGINES) and {"simulated", "vllm"} <= used
    with pytest.raises(UserError, match="server.engine: unknown engine 'trt'"):
        engine_profile("trt")


def _argv(engine: str, cfg: EffectiveConfig, **kw: object) -> list[str]:
    fill = {"host": kw.pop("host", "127.0.0.1"), "python": "python3"}
    return build_launch(
        engine_profile(engine),
        cfg,
        model=str(kw.pop("model", "m")),
        port=kw.pop("port", 8000),  # type: ignore[arg-type]
        fill=fill,
        **kw,
    ).argv  # type: ignore[arg-type]


def test_vllm_launches_as_its_documentation_does_with_no_machine_settings() -> None:
    cfg = EffectiveConfig(
        flags={"max-num-seqs": 4, "speculative-config": NGRAM, "enable-chunked-prefill": True, "enforce-eager": False}
    )
    argv = _argv("vllm", cfg, model="/m/medium llama", port=8123)
    assert argv[:3] == ["vllm", "serve", "/m/medium llama"]
    assert argv[argv.index("--port") + 1] == "8123" and "--dtype" not in argv
    assert argv[argv.index("--speculative-config") + 1] == NGRAM
    assert "--enable-chunked-prefill" in argv and "--enforce-eager" not in argv
    assert argv[argv.index("--max-num-seqs") + 1] == "4"
    launch = build_launch(engine_profile("vllm"), cfg, model="m", port=1, fill={"host": "h"})
    assert launch.env == {}  # no hidden HF_HUB_OFFLINE, VLLM_CPU_KVCACHE_SPACE, ...


def test_a_named_interpreter_runs_the_same_server_module() -> None:
    argv = _argv("vllm", EffectiveConfig(flags={"dtype": "float32"}), python="/venv/bin/python", model="mdl")
    assert argv[:6] == ["/venv/bin/python", "-m", "vllm.entrypoints.cli.main", "serve", "mdl", "--host"]
    assert argv[-2:] == ["--dtype", "float32"]
    # the playbook's own command wins over both forms
    assert _argv("vllm", EffectiveConfig(), python="/p", command="{python} -m x --port {port}") == [
        "/p",
        "-m",
        "x",
        "--port",
        "8000",
    ]


def test_sglang_command() -> None:
    argv = _argv("sglang", EffectiveConfig(flags={"tp": 8}), model="glm", port=30000, host="0.0.0.0")
    assert argv == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "glm",
        "--host",
        "0.0.0.0",
        "--port",
        "30000",
        "--tp",
        "8",
    ]
    assert (
        build_launch(
            engine_profile("sglang"), EffectiveConfig(), model="m", port=1, fill={"host": "h", "python": "python3"}
        ).env
        == {}
    )


def test_launch_env_is_the_profile_defaults_then_the_config_with_secrets_filled_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    profile = engine_profile("vllm").model_copy(update={"env_defaults": {"A": "1", "B": "1"}})
    monkeypatch.setenv("MY_HF_TOKEN", "hf_abcdefghijklmnop")
    cfg = EffectiveConfig(env={"B": "2", "HF_TOKEN": "${MY_HF_TOKEN}"})
    launch = build_launch(profile, cfg, model="mdl", port=9000, fill={"host": "h", "python": "py"})
    assert launch.env == {"A": "1", "B": "2", "HF_TOKEN": "hf_abcdefghijklmnop"}
    assert launch.expect_model == "mdl" and launch.health_path == "/health"
    assert "VLLM_*" in launch.base_env  # the engine's own variables are inherited from the node
    req = launch.request(port=9000, log_path="/tmp/x.log")
    assert req.port == 9000 and req.env == launch.env
    _cmd, env = launch.shown()
    assert env["HF_TOKEN"] == "***"
    planned = build_launch(profile, cfg, model="mdl", port="<port>", fill={"host": "h"}, expand_secrets=False)
    assert planned.env["HF_TOKEN"] == "${MY_HF_TOKEN}" and "<port>" in planned.argv
    monkeypatch.delenv("MY_HF_TOKEN")
    with pytest.raises(UserError, match=r"env: HF_TOKEN: \$\{MY_HF_TOKEN\} is not set"):
        build_launch(profile, cfg, model="mdl", port=9000, fill={"host": "h"})


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
    env.write_text(
        f"# written by setup\nCAMPAIGN_VLLM_PYTHON={py}\nCAMPAIGN_VLLM_MODEL_MEDIUM={tmp_path}/models/"
        f"medium-llama\nCAMPAIGN_VLLM_MODEL_TINY={tmp_path}/models/tiny-llama\n"
    )
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

    metrics = EngineMetrics(
        engine="simulated",
        server_args={
            "flags": {"cuda_graph_max_bs": 128, "api_key": "sk-abcdefghijklmnopqrstuv", "speculative_config": {"k": 2}},
            "env": {"HF_TOKEN": "hf_abcdefghijklmnopqrstuv", "NCCL_ALGO": "Tree"},
        },
    )
    rep = SIM.reported_config(metrics)
    assert rep is not None
    assert rep.flags == {"cuda-graph-max-bs": 128, "api-key": "***", "speculative-config": '{"k":2}'}
    assert rep.env == {"HF_TOKEN": "***", "NCCL_ALGO": "Tree"}
    assert rep.derived_from["speculative-num-steps"] == ["speculative-algorithm"]
    assert SIM.reported_config(EngineMetrics(engine="simulated")) is None  # nothing reported: no claim


def test_the_cpu_builds_settings_are_the_ones_its_playbook_shows() -> None:
    """The planner model and the real-engine tests launch the CPU build with
    tools.engines.setup_env's settings; playbooks/vllm_cpu.yaml writes the same out."""
    from campaign.playbook.load import load_playbook
    from tools.engines.setup_env import CPU_ENV, CPU_FLAGS

    pb = load_playbook(str(Path(__file__).resolve().parents[3] / "playbooks" / "vllm_cpu.yaml"))
    assert {k: v for k, v in pb.baseline.env.items() if k != "VLLM_CACHE_ROOT"} == CPU_ENV
    assert all(f"--{flag} {value}" in (pb.server.command or "") for flag, value in CPU_FLAGS.items())
