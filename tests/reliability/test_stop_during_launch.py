"""SIGTERM or Ctrl-C while a server is still starting: the server is stopped at once (not
left to the next resume), the exit status is 130 and the message says how to resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.campaign.sim_playbook import sim_playbook

ROOT = Path(__file__).resolve().parents[2]


def _simnodes_of(tmp_path: Path) -> list[int]:
    """simnode processes launched for this test's campaign (their log lives under tmp_path)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if "tools.simnode" in cmd and "--port" in cmd and cwd == str(tmp_path):
            out.append(int(proc.name))
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_stop_while_the_server_starts(tmp_path, sig):
    # time scale 1: the simulated start takes a minute of real time, so the stop lands in it
    pb = sim_playbook(tmp_path, [{"name": "h", "flags": {"cuda-graph-max-bs": 128}}], node={"time_scale": 1})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "campaign.cli.main", "run", str(pb)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _simnodes_of(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _simnodes_of(tmp_path), "the server never started"
        time.sleep(1.0)
        t0 = time.monotonic()
        proc.send_signal(sig)
        time.sleep(0.05)
        proc.send_signal(sig)  # twice: an impatient Ctrl-C, or `timeout` forwarding the same TERM
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 20
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    assert "campaign resume" in out
    time.sleep(0.5)
    assert _simnodes_of(tmp_path) == []
