"""Every runtime dependency pyproject declares is imported by the project's code: a
declared package nothing imports is a claim the code does not keep (and an install cost)."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = ("campaign", "tools")


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for package in CODE:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names.add(node.module.split(".")[0])
    return names


def _declared() -> list[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    return [re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps]


def test_every_declared_dependency_is_imported() -> None:
    providers: dict[str, set[str]] = {}
    for module, dists in packages_distributions().items():
        for dist in dists:
            providers.setdefault(dist.lower().replace("_", "-"), set()).add(module)
    imported = _imported_top_levels()
    unused = [d for d in _declared() if not providers.get(d, set()) & imported]
    assert unused == [], f"declared in pyproject but imported nowhere in {CODE}: {unused}"
