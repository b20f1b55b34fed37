"""Model and log text is never rich markup anywhere in the CLI.

`[/bold]` in a rationale raised MarkupError in the live view (and every plain resume
crashed the same way); `campaign status` crashed on a halt reason quoting a patch.
Control characters (terminal escapes) and bidi overrides are shown as `(U+XXXX)`.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from rich.console import Console

from campaign.cli.live import LiveView
from campaign.cli.main import _outcome
from campaign.cli.runner import RunOutcome
from campaign.playbook.load import load_playbook
from campaign.store import Store
from tests.campaign.sim_playbook import sim_playbook

ROOT = Path(__file__).resolve().parents[3]
HOSTILE = "[/bold] [red]x[/] [link=file:///etc/passwd]y[/link] \x1b[2J\x1b]0;title\x07 \u202eevil \u200b["


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, color_system=None, width=400), buf


def test_live_view_prints_every_event_literally() -> None:
    con, buf = _console()
    live = LiveView(console=con)
    live("hypothesis", {"name": "[bold]n", "attempt": 1, "rationale": HOSTILE})
    live("baseline", {"reason": HOSTILE})
    live("launch_failed", {"label": "[/]", "class": "[/red]"})
    live("round", {"round": 1, "hypothesis": "[/x]", "more": True})
    live("verdict", {"kind": "[/]", "failure_class": "[/b]", "hypothesis": "[/i]", "reason": HOSTILE})
    live("environment", {"changed": "[/]", "reopened": ["[/u]"]})
    for kind in ("launch", "ready", "sweep"):
        live(kind, {"label": HOSTILE, "node": "[/]", "url": "[/]", "workload": "[/]"})
    live.close()
    out = buf.getvalue()
    assert "[/bold] [red]x[/] [link=file:///etc/passwd]y[/link]" in out
    assert "\x1b[2J" not in out and "\x1b]0;" not in out and "\u202e" not in out and "\u200b" not in out
    assert "(U+001B)[2J" in out and "(U+202E)evil" in out and "(U+200B)[" in out


@pytest.mark.parametrize("status", ["awaiting_review", "interrupted", "failed", "finished"])
def test_the_outcome_line_prints_a_hostile_reason(
    status: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "_exit", lambda code: (_ for _ in ()).throw(typer.Exit(code)))
    with pytest.raises(typer.Exit):
        _outcome(RunOutcome("c1", status, reason=HOSTILE, journal="[/j].md"))  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "[/bold] [red]x[/]" in out and "\x1b" not in out
    assert status == "interrupted" or "[/j].md" in out


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        check=False,
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=60,
    )


def test_status_and_show_while_awaiting_review_of_a_hostile_patch(tmp_path: Path) -> None:
    pb = load_playbook(sim_playbook(tmp_path, []))
    db = tmp_path / "campaign.db"
    store = Store(db)
    cid = store.create_campaign("[/bold]name", playbook=pb).id
    reason = f"approve the patch of 'x' (--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+{HOSTILE})"
    store.update_campaign(cid, status="awaiting_review", halt_reason=reason)
    for args in (("status",), ("show", cid)):
        res = cli(*args, "--db", str(db), cwd=tmp_path)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        assert "[/bold]" in res.stdout and "\x1b" not in res.stdout and "\u202e" not in res.stdout
    data = json.loads(cli("status", "--db", str(db), "--json", cwd=tmp_path).stdout)
    assert data[0]["halt_reason"] == reason  # the record itself is kept exactly
