"""probe_fingerprint on a real executor, with the node's tools stood in by scripts on
PATH: a CPU box that has a CUDA toolkit installed (nvcc answers, nvidia-smi finds no
driver) must not be fingerprinted as a CUDA node; a GPU node keeps its CUDA version."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.journal.experiment_section import _environment_line
from tools.executors.local import LocalExecutor
from tools.node_runtime import NO_CUDA, probe_fingerprint

NVCC = "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.48'\n"
NO_DRIVER = (
    "#!/bin/sh\necho 'NVIDIA-SMI has failed because it couldn'\"'\"'t communicate with the NVIDIA driver.'\nexit 9\n"
)
TWO_GPUS = "#!/bin/sh\necho 'NVIDIA H200, 570.86.15, 9.0'\necho 'NVIDIA H200, 570.86.15, 9.0'\n"


def _tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **scripts: str) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in scripts.items():
        path = bin_dir / name.replace("_", "-")
        path.write_text(text)
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def test_cpu_node_with_a_cuda_toolkit_says_no_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tools(tmp_path, monkeypatch, nvcc=NVCC, nvidia_smi=NO_DRIVER)
    fp = probe_fingerprint(LocalExecutor())
    assert (fp.gpu_count, fp.arch, fp.cuda) == (0, "cpu", NO_CUDA)
    assert fp.gpu.startswith("cpu: ")
    line = str(_environment_line(fp.components()))
    assert "cuda `none`" in line and "13.0" not in line


def test_gpu_node_keeps_its_cuda_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tools(tmp_path, monkeypatch, nvcc=NVCC, nvidia_smi=TWO_GPUS)
    fp = probe_fingerprint(LocalExecutor())
    assert (fp.gpu, fp.gpu_count, fp.arch, fp.driver, fp.cuda) == ("NVIDIA H200", 2, "sm_90", "570.86.15", "13.0")
