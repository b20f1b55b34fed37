"""The README and the docs site name only what exists.

What is checked, in code (inline code spans and fenced blocks) of README.md and every
page under docs/ (the playbook reference as the build generates it included):

- **Paths**: a word whose first part is one of the repository's own top-level folders
  (`campaign/`, `tools/`, `tests/`, `bench/`, `scripts/`, `playbooks/`, `docs/`, `.ci/`,
  and `journal/example/`, `journal/README.md`), or a top-level file (`pyproject.toml`,
  `mkdocs.yml`, `README.md`), must exist relative to the repository root.  Words with a
  placeholder (`<x>`, `{x}`, `*`, `...`) are skipped; a pytest node id is checked up to
  its `::`.  Paths a run creates (`journal/<name>.md`, `.campaign/...`) are not files of
  the repository and are not checked.
- **Dotted names**: `campaign.x.y` / `tools.x.y` must import as a module or resolve as an
  attribute of one.
- **Commands**: a command line (a code span, or a line of a block, split at `;`, `&&`,
  `||` and `|`) that starts with `campaign WORD` (after a `$ ` prompt or `VAR=value`
  assignments) must name a command the typer app registers.
- **Options**: a `--long` or `-s` option that follows `campaign COMMAND` in the same
  command line (up to `;`, `&&`, `||`, `| ` or a shell comment) must be
  one of that command's parameters (or `--help`).  Options anywhere else (`vllm serve`
  flags, pytest's `-k`, an engine's `--max-num-seqs` in prose) belong to other tools and
  are out of scope, and so are the options of `campaign simnode`, which hands every
  argument to the simulated node (SGLang's flags included).
- Every YAML block in the docs that holds a whole playbook (`name:` and `workloads:`)
  validates.
- README.md is at most 200 lines.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest
import typer.main
import yaml

ROOT = Path(__file__).resolve().parent.parent
TOP_DIRS = ("campaign", "tools", "tests", "bench", "scripts", "playbooks", "docs", ".ci")
TOP_FILES = ("pyproject.toml", "mkdocs.yml", "README.md")
PASS_THROUGH = {"simnode"}

FENCE = re.compile(r"^(```|~~~)(\w*)[^\n]*\n(.*?)^\1\s*$", re.M | re.S)
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
PATH = re.compile(r"(?<![\w./-])(\.?[\w.-]+(?:/[\w.<>{}*@:+-]*)+|[\w-]+\.(?:toml|yml|md))")
DOTTED = re.compile(r"(?<![\w./-])((?:campaign|tools)(?:\.[A-Za-z_]\w*)+)(?![\w/-])")
#: what may stand before `campaign` at the start of a command line: a prompt, `(`, VAR=value
LEADING = re.compile(r"^\s*(?:\$\s+|\(\s*)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*")
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def doc_text(path: Path) -> str:
    text = path.read_text()
    if path.name == "playbook.md" and path.parent.name == "reference":
        sys.path.insert(0, str(ROOT / "scripts"))
        try:
            import docs_hooks
        finally:
            sys.path.pop(0)
        text = docs_hooks.on_page_markdown(text, None, None, None)
    return text


def code_of(text: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block and inline span; "" for a span."""
    out = [(m.group(2), m.group(3)) for m in FENCE.finditer(text)]
    rest = FENCE.sub("", text)
    out.extend(("", m.group(1)) for m in SPAN.finditer(rest))
    return out


def shell_lines(lang: str, code: str) -> list[str]:
    """Command lines: a shell block's comments dropped; a YAML block has none to check."""
    if lang in ("yaml", "yml", "json", "text"):
        return []
    lines = code.splitlines()
    if lang in ("bash", "sh", "console", "shell"):
        lines = [re.sub(r"(^|\s)#.*$", "", line) for line in lines]
    return lines


def is_repo_path(word: str) -> bool:
    word = word.rstrip(".,:;)")
    if word in TOP_FILES:
        return True
    first = word.split("/", 1)[0]
    if first == "journal":
        return word.startswith(("journal/example", "journal/README.md"))
    return first in TOP_DIRS and "/" in word


def path_problems(word: str) -> str | None:
    word = word.rstrip(".,:;)").split("::", 1)[0]
    if any(ch in word for ch in "<>{}*") or "..." in word:
        return None
    return None if (ROOT / word).exists() else f"no such path: {word}"


def dotted_problems(name: str) -> str | None:
    parts = name.split(".")
    if parts[-1] in ("py", "md", "db", "yaml", "json", "sqlite"):
        return None
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return f"no such name: {name}"
            obj = getattr(obj, attr)
        return None
    return f"no such module: {name}"


def cli_commands() -> dict[str, set[str]]:
    from campaign.cli.main import app
    from campaign.cli.toolkit import register

    if not any(c.name == "bench" for c in app.registered_commands):
        register(app)  # as `campaign.cli.main.main` does before it runs
    group = typer.main.get_command(app)
    out: dict[str, set[str]] = {}
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        opts = {"--help", "-h"}
        for p in cmd.params:
            opts.update(p.opts)
            opts.update(p.secondary_opts)
        out[name] = opts
    return out


def line_problems(line: str, commands: dict[str, set[str]]) -> list[str]:
    problems = []
    for seg in re.split(r"&&|\|\||;|\|(?= )", line):
        command = LEADING.sub("", seg)
        m = re.match(r"campaign\s+([a-z][\w-]*)", command)
        if m:
            name = m.group(1)
            part = command[m.end() :]
            if name not in commands:
                problems.append(f"no such command: campaign {name}")
                continue
            if name in PASS_THROUGH:
                continue
            for opt in OPTION.findall(part):
                for one in re.split(r"[/|]", opt):
                    if one.startswith("-") and one not in commands[name]:
                        problems.append(f"campaign {name} has no option {one}")
    return problems


def problems_in(text: str, commands: dict[str, set[str]]) -> list[str]:
    out: list[str] = []
    for lang, code in code_of(text):
        if lang in ("yaml", "yml"):
            continue
        for word in PATH.findall(code):
            if is_repo_path(word):
                problem = path_problems(word)
                if problem:
                    out.append(problem)
        for name in DOTTED.findall(code):
            problem = dotted_problems(name)
            if problem:
                out.append(problem)
        for line in shell_lines(lang, code) if lang else [code]:
            out.extend(line_problems(line.replace("\\|", "|"), commands))
    return out


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_page_names_only_paths_commands_and_options_that_exist(path: Path) -> None:
    problems = problems_in(doc_text(path), cli_commands())
    assert not problems, f"{path.relative_to(ROOT)}: " + "; ".join(dict.fromkeys(problems))


def test_the_checks_catch_what_does_not_exist() -> None:
    commands = cli_commands()
    bad = (
        "`tools/source/patches.py`, `campaign.verdict.nosuch`, `campaign frobnicate`, "
        "`campaign run PLAYBOOK --no-such-flag`\n\n```bash\ncampaign resume ID --aprove\n"
        "pip install . && OPENAI_API_KEY=x campaign runn P   # campaign ignored in a comment\n```\n"
    )
    found = problems_in(bad, commands)
    assert sorted(found) == sorted(
        [
            "no such path: tools/source/patches.py",
            "no such name: campaign.verdict.nosuch",
            "no such command: campaign frobnicate",
            "campaign run has no option --no-such-flag",
            "campaign resume has no option --aprove",
            "no such command: campaign runn",
        ]
    ), found
    fine = (
        "`vllm serve --max-num-seqs 4`, `journal/eagle-fast-verify.md`, `campaign simnode --tp 8`, "
        "`<journal>.d/index.sqlite`, `python -m pytest -q tests/test_docs.py -k paths`, "
        "`thread id = campaign id`"
    )
    assert problems_in(fine, commands) == []


def test_every_playbook_field_has_a_description_and_an_example() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import docs_hooks
    finally:
        sys.path.pop(0)
    assert docs_hooks.undescribed() == []


def test_every_playbook_in_the_docs_validates(tmp_path: Path) -> None:
    from campaign.playbook.load import load_playbook

    seen = 0
    for path in doc_files():
        for lang, code in code_of(path.read_text()):
            if lang not in ("yaml", "yml"):
                continue
            data = yaml.safe_load(code)
            if not (isinstance(data, dict) and "name" in data and "workloads" in data):
                continue
            seen += 1
            f = tmp_path / f"{path.stem}-{seen}.yaml"
            f.write_text(code)
            load_playbook(str(f))
    assert seen >= 2


def test_the_readmes_links_lead_to_files_that_exist() -> None:
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    missing = [t for t in targets if not t.startswith(("http://", "https://")) and not (ROOT / t).exists()]
    assert targets and not missing, f"README.md links to missing files: {missing}"


def test_the_readme_is_at_most_200_lines() -> None:
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= 200, f"README.md has {n} lines (at most 200: move the rest to a page under docs/)"
