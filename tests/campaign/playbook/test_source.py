"""`server.source` and `{source}`: a patch with nowhere to be applied, or a source
tree the command does not run from, is a validation error naming the field and the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.playbook.load import parse_playbook_text

ROOT = Path(__file__).resolve().parents[3]

BASE = """\
name: t
server:
  command: "env PYTHONPATH={source} {python} -P -m tools.simnode --port {port} {flags}"
  source: {repo: ., ref: main, allowed_paths: [tools/simnode/], allow: [executable]}
workloads:
  single: {concurrency: [1]}
hypotheses:
  - name: a
    patch: p.diff
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(UserError) as exc:
        parse_playbook_text(text, "pb.yaml")
    return exc.value.lines


def test_a_source_tree_with_its_rules_is_accepted() -> None:
    pb = parse_playbook_text(BASE, "pb.yaml")
    assert pb.server.source is not None and pb.server.source.ref == "main"
    assert pb.server.source.rules().allowed_paths == ["tools/simnode/"]
    assert pb.server.source.rules().allow == ["executable"]


def test_a_patch_without_a_source_names_the_field_and_the_fix() -> None:
    text = BASE.replace("  source: {repo: ., ref: main, allowed_paths: [tools/simnode/], allow: [executable]}\n", "")
    text = text.replace("env PYTHONPATH={source} ", "")
    assert _problems(text) == [
        (
            "pb.yaml:8: hypotheses[0].patch: a patch needs server.source (fix: add server: {source: {repo: PATH, "
            "ref: BRANCH}} and run the command from {source})"
        )
    ]


def test_a_source_the_command_does_not_run_from_is_refused() -> None:
    lines = _problems(BASE.replace("env PYTHONPATH={source} ", ""))
    assert len(lines) == 1 and "server.command: does not use {source}" in lines[0]
    text = BASE.replace("  source: {repo: ., ref: main, allowed_paths: [tools/simnode/], allow: [executable]}\n", "")
    assert any("server.command: uses {source} but server.source is not set" in ln for ln in _problems(text))


def test_an_unknown_unsafe_shape_is_refused_with_the_choices() -> None:
    [line] = _problems(BASE.replace("allow: [executable]", "allow: [setuid]"))
    assert line.startswith("pb.yaml:4: server.source.allow[0]:") and "symlink" in line


def test_the_cli_says_it_in_one_line_with_exit_2(tmp_path: Path) -> None:
    text = BASE.replace("  source: {repo: ., ref: main, allowed_paths: [tools/simnode/], allow: [executable]}\n", "")
    (tmp_path / "p.diff").write_text("--- a/x\n+++ b/x\n")
    (tmp_path / "pb.yaml").write_text(text.replace("env PYTHONPATH={source} ", ""))
    r = subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", "validate", str(tmp_path / "pb.yaml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout
    assert "hypotheses[0].patch: a patch needs server.source" in r.stderr + r.stdout
