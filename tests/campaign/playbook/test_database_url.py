"""`database:` is a SQLite file path: a URL is refused at load, before anything is written,
and a password in it is never repeated (the playbook is stored with the campaign)."""

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


def test_a_url_is_refused_in_one_line_before_anything_is_written(tmp_path: Path) -> None:
    pb = sim_playbook(tmp_path, [], database="postgresql://alice@db.example/campaigns")
    before = sorted(p.name for p in tmp_path.iterdir())
    out = subprocess.run([sys.executable, "-m", "campaign.cli.entry", "run", str(pb), "-q"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "database: postgresql:// URLs are not supported" in out.stderr and "Traceback" not in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no file named after the URL
