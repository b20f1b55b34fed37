"""The house: arrows run one way (composition root -> adapters -> core), checked by
import-linter's contracts in pyproject.toml, and a broken arrow fails this test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = str(Path(sys.executable).parent / "lint-imports")
    if not Path(exe).exists():
        exe = shutil.which("lint-imports") or exe
    return subprocess.run([exe, "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_import_contracts_hold_on_the_shipped_tree() -> None:
    res = _lint_imports(ROOT)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout


@pytest.mark.parametrize(
    "module, line",
    [
        ("campaign/verdict/stats.py", "from campaign.store import Store  # noqa: F401"),  # a lower layer reaching up
        ("campaign/journal/format.py", "import tools.node_runtime  # noqa: F401"),  # the core importing an adapter
        ("tools/server/triage.py", "import campaign.loop.graph  # noqa: F401"),  # an adapter importing the loop
    ],
)
def test_a_wrong_arrow_breaks_a_contract(tmp_path: Path, module: str, line: str) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "campaign", tree / "campaign")
    shutil.copytree(ROOT / "tools", tree / "tools")
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    with (tree / module).open("a") as f:
        f.write("\n" + line + "\n")
    res = _lint_imports(tree, env={**os.environ, "PYTHONPATH": str(tree)})  # the copy shadows the install
    assert res.returncode != 0, res.stdout[-2000:]
    assert "BROKEN" in res.stdout
