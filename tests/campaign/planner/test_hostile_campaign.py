"""Hostile endpoint shapes through a real `campaign run` subprocess on the simulated node:
no traceback, every call recorded, a clean stop with the reason, and the record readable
by `campaign status`, `campaign show` and the journal whatever the model wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.campaign.sim_playbook import sim_playbook
from tests.hostile_openai import HostileServer, Shape, content, proposal, raw_body

ROOT = Path(__file__).resolve().parents[3]
HTML = raw_body(b"<html><body><h1>It works!</h1></body></html>", ctype="text/html")
MARKUP = "[/bold] [link=file:///etc/passwd]click[/link] \x1b[31mred\x1b[0m \u202eevil"
KNOBS = {"flags": {"cuda-graph-max-bs": {"type": "int", "min": 1, "max": 512}}}


def campaign(*args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="200", NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        check=False,
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def run_against(
    tmp_path: Path, script: list[Shape], **planner: object
) -> tuple[subprocess.CompletedProcess[str], dict]:
    with HostileServer(script) as srv:
        pb = sim_playbook(
            tmp_path,
            [],
            planner={
                "kind": "llm",
                "model": "m",
                "base_url": srv.url,
                "timeout_s": 5,
                "max_retries": 0,
                "max_proposals": 1,
                **planner,
            },
            knobs=KNOBS,
        )
        res = campaign("run", str(pb), "--db", str(tmp_path / "campaign.db"), cwd=tmp_path)
    assert "Traceback" not in res.stdout + res.stderr, res.stderr
    status = campaign("status", "--db", str(tmp_path / "campaign.db"), "--json", cwd=tmp_path)
    [row] = json.loads(status.stdout)
    show = campaign("show", row["id"], "--db", str(tmp_path / "campaign.db"), "--json", cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    return res, json.loads(show.stdout)


@pytest.mark.slow
def test_an_html_endpoint_stops_cleanly_with_one_line(tmp_path: Path) -> None:
    res, data = run_against(tmp_path, [HTML], max_retries=2)
    assert res.returncode == 2, res.stderr
    [line] = [ln for ln in res.stderr.splitlines() if ln.startswith("campaign:")]
    assert "an HTML page" in line and "(3 answers in a row)" in line and line.count("fix:") == 1, line
    calls = data["planner_calls"]
    assert [c["outcome"] for c in calls] == ["failed"] * 3 and "HTML page" in calls[0]["reason"]
    assert any("planner unavailable" in n for n in data["planner_notes"])


@pytest.mark.slow
def test_markup_in_model_text_and_a_bad_analysis_body_do_not_stop_the_campaign(tmp_path: Path) -> None:
    """A rationale full of markup, escapes and bidi is shown literally; the analysis call then
    gets an HTML page after the verdict is saved; the planner then stops at max_proposals."""
    script = [proposal("smaller-graph", flags={"cuda-graph-max-bs": 128}, rationale=MARKUP), HTML]
    res, data = run_against(tmp_path, script)
    assert res.returncode == 0, res.stderr
    assert "[/bold] [link=file:///etc/passwd]click[/link]" in res.stderr  # literally, not as markup
    assert "\x1b[31m" not in res.stderr + res.stdout and "(U+001B)" in res.stderr and "(U+202E)" in res.stderr
    assert [e["hypothesis"] for e in data["experiments"]] == ["smaller-graph"]
    assert data["experiments"][0]["verdict"] is not None
    outcomes = [(c["purpose"], c["outcome"]) for c in data["planner_calls"]]
    assert outcomes == [("propose", "accepted"), ("analyze", "failed")]
    assert data["planner_notes"][-1].startswith("planner stopped: planner.max_proposals (1)")
    assert data["halt_reason"].startswith("planner stopped: planner.max_proposals (1)")  # not "queue exhausted"
    journal = (tmp_path / "journal" / "test.md").read_text()
    assert "## Planner" in journal and "(U+202E)" in journal and "\u202e" not in journal
    table = campaign("status", "--db", str(tmp_path / "campaign.db"), cwd=tmp_path)
    assert table.returncode == 0 and "Traceback" not in table.stderr


@pytest.mark.slow
def test_every_answer_rejected_is_counted_and_the_stop_is_named(tmp_path: Path) -> None:
    bad = content('{"name": "[red]x", "flags": [{"name": "cuda-graph-max-bs", "value": "128; rm -rf /"}]}')
    res, data = run_against(tmp_path, [bad], max_rejections=5)
    assert res.returncode == 0, res.stderr
    calls = data["planner_calls"]
    assert len(calls) == 6 and {c["outcome"] for c in calls} == {"rejected"}  # identical calls, none dropped
    assert all("unsafe characters" in c["reason"] for c in calls)
    assert any(n.startswith("planner stopped: 6 proposals rejected in a row") for n in data["planner_notes"])
    assert data["halt_reason"].startswith("planner stopped: 6 proposals rejected in a row"), data["halt_reason"]
    assert data["experiments"] == []
    journal = (tmp_path / "journal" / "test.md").read_text()
    assert "| rejected | propose |" in journal and "| 6 |" in journal
    assert "\\[red\\]x" in journal or "\\[red" in journal  # the refused answer, escaped
