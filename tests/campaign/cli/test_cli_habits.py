"""What a command line is expected to do: `--version`, `-h` on every command, shell
completion, a unique id prefix wherever an id is taken (an ambiguous one refused with the
ids it could mean), `status` ids shown whole, no wrapping at 80 columns into a pipe."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from campaign.cli.main import full_app
from campaign.playbook.load import load_playbook
from campaign.store import Store
from tests.campaign.cli.test_cli_errors import GOOD, ROOT, cli, one_line_error

IDS = ("cli-errors-aa1111", "cli-errors-ab2222")
WHY = "halted for review: " + "the review gate asks for a newer CUDA before the next experiment " * 3


@pytest.fixture()
def two(tmp_path: Path) -> Path:
    """A database with two campaigns whose ids share the prefix `cli-errors-a`."""
    pb_path = tmp_path / "good.yaml"
    pb_path.write_text(GOOD.format(journal=tmp_path / "journal" / "j.md"))
    pb = load_playbook(pb_path)
    db = tmp_path / "state" / "campaign.db"
    with Store(db) as store:
        for cid in IDS:
            store.create_campaign(pb.name, playbook=pb, playbook_path=str(pb_path), campaign_id=cid)
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE campaigns SET halt_reason = ? WHERE id = ?", (WHY, IDS[0]))
    con.close()
    return db


def entry(*args: str, cwd: Path, columns: str | None = None) -> subprocess.CompletedProcess[str]:
    """The console script's module, its output a pipe (not a terminal)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update({"PYTHONPATH": str(ROOT), "NO_COLOR": "1", **({"COLUMNS": columns} if columns else {})})
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.entry", *args],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
    )


def test_a_unique_prefix_names_the_campaign(two: Path, tmp_path: Path) -> None:
    res = entry("show", "cli-errors-ab", "--db", str(two), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f'"id": "{IDS[1]}"' in res.stdout
    res = cli("unlock", "cli-errors-aa", "--db", str(two), cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.startswith(f"{IDS[0]}: lock"), res.stdout + res.stderr
    res = cli("export", "cli-errors-aa", "--db", str(two), "--format", "json", cwd=tmp_path)
    assert res.returncode == 0 and f'"campaign_id": "{IDS[0]}"' in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize(
    "command",
    [["show"], ["journal"], ["unlock"], ["resume"], ["export"], ["compare", f"{IDS[1]}:x"]],
    ids=lambda c: c[0],
)
def test_an_ambiguous_prefix_lists_the_matches(two: Path, tmp_path: Path, command: list[str]) -> None:
    one_line_error(
        cli(command[0], "cli-errors-a", *command[1:], "--db", str(two), cwd=tmp_path),
        "cli-errors-a: 2 campaigns start with it",
        IDS[0],
        IDS[1],
    )


def test_status_shows_whole_ids_and_does_not_wrap_into_a_pipe(two: Path, tmp_path: Path) -> None:
    res = entry("status", "--db", str(two), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert all(cid in res.stdout for cid in IDS)
    assert any(WHY.strip() in line for line in res.stdout.splitlines()), res.stdout  # one line, not 80 columns
    narrow = entry("status", "--db", str(two), cwd=tmp_path, columns="60")
    assert all(cid in narrow.stdout for cid in IDS), narrow.stdout


def test_version_and_completion(tmp_path: Path) -> None:
    res = entry("--version", cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.startswith("campaign "), res.stdout + res.stderr
    res = entry("--show-completion", "bash", cwd=tmp_path)
    assert res.returncode == 0 and "_CAMPAIGN_COMPLETE" in res.stdout, res.stdout + res.stderr


def test_dash_h_on_every_command() -> None:
    app = full_app()
    runner = CliRunner()
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    names = [n for n in names if n != "simnode"]  # simnode passes -h on to tools.simnode
    assert {"run", "resume", "status", "show", "journal", "validate", "init", "schema", "bench"} <= set(names)
    for name in [None, *names]:
        args = [name, "-h"] if name else ["-h"]
        res = runner.invoke(app, args, prog_name="campaign")
        assert res.exit_code == 0 and "Usage" in res.output, (name, res.output)


def test_the_run_log_is_not_wrapped_into_a_pipe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from campaign.cli.live import LiveView

    monkeypatch.delenv("COLUMNS", raising=False)
    reason = "wins at every level " * 20
    LiveView()("verdict", {"kind": "win", "hypothesis": "ngram-spec", "reason": reason})
    err = capsys.readouterr().err
    assert any(reason.strip() in line for line in err.splitlines()), err
