"""`campaign init --from-cmd` and `campaign schema` through the real CLI: the playbook init
writes loads with the playbook loader, keeps the user's own flags, leaves out what the
campaign decides (port, host) and every secret; the shipped schema is current and every
shipped playbook validates against it and points at it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from campaign.cli.cmdparse import parse_serve_command
from campaign.cli.schema_cmd import SHIPPED, schema_text
from campaign.domain.errors import UserError
from campaign.playbook.load import load_playbook
from tests.campaign.cli.test_cli_errors import ROOT, cli, one_line_error

SCHEMA_LINE = "# yaml-language-server: $schema="


def test_shipped_schema_is_current_and_printed() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == schema_text(), (
        "run: campaign schema -o playbooks/playbook.schema.json"
    )
    res = cli("schema", cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["title"] == "Playbook"


@pytest.mark.parametrize("path", sorted((ROOT / "playbooks").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_playbook_points_at_the_schema_and_fits_it(path: Path) -> None:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith(SCHEMA_LINE), first
    assert (path.parent / first.removeprefix(SCHEMA_LINE)).resolve() == SHIPPED
    jsonschema.validate(yaml.safe_load(path.read_text()), json.loads(SHIPPED.read_text()))


def test_schema_refuses_an_unknown_key() -> None:
    data = yaml.safe_load((ROOT / "playbooks/eagle_verify.yaml").read_text())
    data["verdict"]["min_effect"] = 2
    with pytest.raises(jsonschema.ValidationError, match="min_effect"):
        jsonschema.validate(data, json.loads(SHIPPED.read_text()))


VLLM = (
    "CUDA_VISIBLE_DEVICES=0,1 HF_TOKEN=hf_abcdefghijklmnopqrstu vllm serve Qwen/Qwen3-8B "
    "--tensor-parallel-size 2 --max-model-len=8192 --enforce-eager --port 8000 --host 0.0.0.0 "
    "--gpu-memory-utilization 0.85 --api-key sk-secretsecretsecret123 "
    '--speculative-config \'{"method": "ngram", "num_speculative_tokens": 3}\''
)


def test_init_from_vllm_serve(tmp_path: Path) -> None:
    res = cli("init", "--from-cmd", VLLM, "-o", "pb/tuned.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    path = tmp_path / "pb/tuned.yaml"
    text = path.read_text()
    assert "hf_abcdefghijklmnopqrstu" not in text and "sk-secret" not in text  # never in a playbook
    first = text.splitlines()[0]
    assert (path.parent / first.removeprefix(SCHEMA_LINE)).resolve() == SHIPPED
    pb = load_playbook(path)
    assert (pb.server.engine, pb.server.model, pb.node.kind) == ("vllm", "Qwen/Qwen3-8B", "local")
    assert pb.baseline.flags == {
        "tensor-parallel-size": 2,
        "max-model-len": 8192,
        "enforce-eager": True,
        "gpu-memory-utilization": 0.85,
        "speculative-config": '{"method": "ngram", "num_speculative_tokens": 3}',
    }
    assert pb.baseline.env == {"CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "${HF_TOKEN}"}
    assert pb.workloads["sweep"].concurrency == [1, 8, 32, 128]  # tp 2
    assert len(pb.hypotheses) == 3
    assert all(set(h.flags).isdisjoint(pb.baseline.flags) for h in pb.hypotheses)
    assert cli("validate", "pb/tuned.yaml", cwd=tmp_path).returncode == 0
    # a second init does not overwrite without --force
    again = cli("init", "--from-cmd", "vllm serve other", "-o", "pb/tuned.yaml", cwd=tmp_path)
    one_line_error(again, "pb/tuned.yaml", "already exists", "--force")
    assert path.read_text() == text
    assert cli("init", "--from-cmd", "vllm serve other", "-o", "pb/tuned.yaml", "--force", cwd=tmp_path).returncode == 0
    assert load_playbook(path).server.model == "other"


@pytest.mark.parametrize(
    ("cmd", "args", "engine", "model", "levels", "node"),
    [
        (
            "/opt/venv/bin/python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --tp 2 --dp 2 --port 30000",
            ("--node", "slurm:gpu"),
            "sglang",
            "meta-llama/Llama-3.1-8B",
            [1, 16, 64, 256],
            "slurm",
        ),
        (
            "python -m vllm.entrypoints.openai.api_server --model .campaign/models/tiny-llama --max-model-len 512",
            ("--gpus", "1", "--node", "ssh://me@gpu-box:2222"),
            "vllm",
            ".campaign/models/tiny-llama",
            [1, 4, 16, 64],
            "ssh",
        ),
    ],
)
def test_init_other_launchers_and_nodes(
    tmp_path: Path, cmd: str, args: tuple[str, ...], engine: str, model: str, levels: list[int], node: str
) -> None:
    res = cli("init", "--from-cmd", cmd, "-o", "p.yaml", *args, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    pb = load_playbook(tmp_path / "p.yaml")
    assert (pb.server.engine, pb.server.model, pb.node.kind) == (engine, model, node)
    assert pb.workloads["sweep"].concurrency == levels
    assert "port" not in pb.baseline.flags
    if node == "ssh":
        assert (pb.node.host, pb.node.user, pb.node.port) == ("gpu-box", "me", 2222)
        # max-model-len 512: requests fit the context
        assert pb.workloads["sweep"].prompt_tokens + pb.workloads["sweep"].output_tokens <= 512
    if node == "slurm":
        assert (pb.node.partition, pb.node.gres, pb.server.python) == ("gpu", "gpu:4", "/opt/venv/bin/python")


@pytest.mark.parametrize(
    ("cmd", "needle"),
    [
        ("llama-server -m model.gguf", "not a vLLM or SGLang server command"),
        ("vllm serve --max-model-len 8", "names no model"),
        ("vllm serve m -x 3", "short option"),
        ("vllm serve m --x 'unbalanced", "balance the quotes"),
    ],
)
def test_init_refuses_what_it_cannot_read(tmp_path: Path, cmd: str, needle: str) -> None:
    one_line_error(cli("init", "--from-cmd", cmd, "-o", "p.yaml", cwd=tmp_path), "--from-cmd", needle)
    assert not (tmp_path / "p.yaml").exists()


def test_init_refuses_a_bad_node(tmp_path: Path) -> None:
    one_line_error(
        cli("init", "--from-cmd", "vllm serve m", "--node", "kubernetes", "-o", "p.yaml", cwd=tmp_path),
        "--node",
        "ssh://user@host",
    )


def test_flag_spellings() -> None:
    got = parse_serve_command(
        "env OMP_NUM_THREADS=4 vllm serve m -tp 4 -O3 --seed -1 --trust-remote-code "
        "--dtype=bfloat16 --served-model-name x"
    )
    assert got.flags == {
        "tensor-parallel-size": 4,
        "compilation-config": 3,
        "seed": -1,
        "trust-remote-code": True,
        "dtype": "bfloat16",
    }
    assert got.env == {"OMP_NUM_THREADS": "4"} and got.gpus() == 4
    assert any("served-model-name" in d for d in got.dropped)
    with pytest.raises(UserError):
        parse_serve_command("")


def _bin(tmp_path: Path, gpus: int | None) -> Path:
    """A PATH directory with a `vllm` launcher (its venv's python beside it) and, unless
    None, an `nvidia-smi` that lists `gpus` GPUs (0: fails as on a machine without a driver)."""
    import os
    import sys

    bindir = tmp_path / "venv" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "python").symlink_to(sys.executable)
    for name, body in [
        ("vllm", "exit 0"),
        *(
            [
                (
                    "nvidia-smi",
                    "\n".join([f"echo 'GPU {i}: NVIDIA H100 (UUID: GPU-{i})'" for i in range(gpus)]) or "exit 9",
                )
            ]
            if gpus is not None
            else []
        ),
    ]:
        (bindir / name).write_text(f"#!/bin/sh\n{body}\n")
        os.chmod(bindir / name, 0o755)
    return bindir


@pytest.mark.parametrize(("gpus", "levels", "tokens"), [(2, [1, 8, 32, 128], (512, 256)), (0, [1, 4, 16], (64, 64))])
def test_init_sizes_the_load_to_the_gpus_nvidia_smi_lists(
    tmp_path: Path, gpus: int, levels: list[int], tokens: tuple[int, int]
) -> None:
    import os
    import subprocess
    import sys

    bindir = _bin(tmp_path, gpus)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{bindir}:/usr/bin:/bin"}
    res = subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", "init", "--from-cmd", "vllm serve m", "-o", "p.yaml"],
        cwd=tmp_path,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    pb = load_playbook(tmp_path / "p.yaml")
    sweep = pb.workloads["sweep"]
    assert sweep.concurrency == levels and (sweep.prompt_tokens, sweep.output_tokens) == tokens
    # the bare `vllm` of the user's PATH runs its venv's python: the campaign launches with it
    assert pb.server.python == str(bindir / "python")


def test_a_remote_node_is_not_sized_by_this_machines_gpus() -> None:
    from campaign.cli.init_cmd import gpu_count

    assert gpu_count(parse_serve_command("vllm serve m"), None, local=False)[0] == 1
    assert gpu_count(parse_serve_command("vllm serve m -tp 4"), None, local=False)[0] == 4
    assert gpu_count(parse_serve_command("vllm serve m -tp 4"), 8, local=False)[0] == 8
