"""`database:` is a SQLite file path or a postgresql:// URL without a password: anything else
is refused at load, before anything is written, and a password is never repeated (the
playbook is stored with the campaign)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.playbook.load import load_playbook
from tests.campaign.sim_playbook import sim_playbook

ROOT = Path(__file__).resolve().parents[3]


def test_a_password_in_the_url_is_refused_and_not_repeated(tmp_path: Path) -> None:
    pb = sim_playbook(tmp_path, [], database="postgresql://alice:s3cret-pw@db.example/campaigns")
    with pytest.raises(UserError) as err:
        load_playbook(pb)
    text = "\n".join(err.value.lines or [str(err.value)])
    assert "database" in text and "password" in text and "(fix:" in text
    assert "s3cret-pw" not in text


def _campaign(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.entry", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **(env or {})},
    )


def test_validate_refuses_a_password_in_one_line_without_repeating_it(tmp_path: Path) -> None:
    pb = sim_playbook(tmp_path, [], database="postgresql://alice:s3cret-pw@db.example/campaigns")
    out = _campaign(tmp_path, "validate", str(pb))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "database" in out.stderr and "PGPASSWORD" in out.stderr and "s3cret-pw" not in out.stderr + out.stdout


def test_a_postgresql_url_without_password_validates(tmp_path: Path) -> None:
    pb = sim_playbook(tmp_path, [], database="postgresql://alice@db.example/campaigns")
    assert load_playbook(pb).database == "postgresql://alice@db.example/campaigns"


def test_another_scheme_is_refused_in_one_line_before_anything_is_written(tmp_path: Path) -> None:
    pb = sim_playbook(tmp_path, [], database="mysql://alice@db.example/campaigns")
    before = sorted(p.name for p in tmp_path.iterdir())
    out = _campaign(tmp_path, "run", str(pb), "-q")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "database: mysql:// databases are not supported" in out.stderr and "Traceback" not in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no file named after the URL


def test_a_password_in_campaign_database_url_is_refused_too(tmp_path: Path) -> None:
    pb = sim_playbook(tmp_path, [])
    before = sorted(p.name for p in tmp_path.iterdir())
    out = _campaign(
        tmp_path,
        "run",
        str(pb),
        "-q",
        env={"CAMPAIGN_DATABASE_URL": "postgresql://alice:s3cret-pw@127.0.0.1:1/campaigns"},
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "CAMPAIGN_DATABASE_URL" in out.stderr and "s3cret-pw" not in out.stderr + out.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == before
