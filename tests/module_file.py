"""A module written by a test into a file of its own and imported from there, as an
extension a user adds (an engine, a node kind) is: no file of the project names it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def import_module_file(tmp_path: Path, name: str, source: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """`source` as module `name` (in sys.modules until the test ends)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module
