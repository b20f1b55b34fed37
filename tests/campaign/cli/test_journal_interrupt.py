"""Ctrl-C on `campaign journal` while its worker processes draw the plots: one line,
exit 130, no process left behind; the next `campaign journal` draws what is missing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench import scale_build

ROOT = Path(__file__).resolve().parents[3]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_while_plots_are_drawn_stops_cleanly_and_a_rerun_finishes(tmp_path: Path) -> None:
    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 80)
    journal = tmp_path / "j" / "journal.md"
    plots = tmp_path / "j" / "journal.plots"
    cmd = [sys.executable, "-m", "campaign.cli.entry", "journal", cid, "--db", str(db), "--out", str(journal)]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while not (plots.exists() and any(p.suffix == ".png" for p in plots.iterdir())):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no plot was drawn"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole foreground group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and "Exception ignored" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("campaign: interrupted") and f"campaign journal {cid}" in lines[0]
    assert journal.exists()  # the Markdown was written before the plots
    deadline = time.monotonic() + 15
    while _group_alive(proc.pid):  # the plot workers are gone too
        assert time.monotonic() < deadline, "a plot worker outlived the interrupted command"
        time.sleep(0.1)
    drawn = {p.name for p in plots.iterdir() if p.suffix == ".png"}

    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == str(journal)
    linked = {
        line.split("](")[1].split(")")[0].rsplit("/", 1)[-1]
        for page in (tmp_path / "j" / "journal.d").glob("*.md")
        for line in page.read_text().splitlines()
        if line.startswith("![")
    }
    assert linked and drawn < linked  # the interrupted run left some out...
    on_disk = {p.name for p in plots.iterdir()}
    assert linked <= on_disk  # ...the rerun drew every plot a page links
    assert not [n for n in on_disk if n.endswith(".tmp")]  # and removed what a stopped worker left
