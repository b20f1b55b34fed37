"""The base environment a launched server starts from: named variables only.

Why a list, not the controller's environment: a server's environment is readable in
`/proc/PID/environ` on the node for the server's whole lifetime, and the controller's
holds `OPENAI_API_KEY` and every other credential of the person running the campaign.
So a server gets the node environment's variables whose names match the base list (what
a process needs to run: PATH, HOME, locale, the GPUs it was given), the engine's own
variables, the playbook's env and the secrets that env references, and nothing else.

The list is `server.base_env` in a playbook (it replaces the default, engine
variables included).  Entries are names or `PREFIX*` patterns.  A secret-named
variable is never inherited, whatever the list says: secrets reach a server only as
`${NAME}` references in the playbook's env, so the record says which ones it got.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

from campaign.domain.redact import SECRET_ENV, is_secret_name

#: what any process needs: the search path, home and user, locale and time zone,
#: temp dir, the loader and Python paths (engines are Python programs), and the accelerators a scheduler assigned (Slurm
#: sets CUDA_VISIBLE_DEVICES and SLURM_* for the job's GPUs).
DEFAULT_BASE_ENV: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "TERM",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "SLURM*",
)

#: a base_env entry: a variable name, optionally ending in `*`.
_ENTRY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")


def entry_problem(entry: str) -> str | None:
    """Why `entry` cannot be a base_env entry (None: it can).  One line with the fix."""
    if not _ENTRY.match(entry):
        return (
            f"{entry!r} is not a variable name or a NAME* pattern "
            "(fix: letters, digits and '_', optionally ending in '*')"
        )
    name = entry.rstrip("*")
    if is_secret_name(name):
        return (
            f"{entry!r} names a secret, and secrets are never inherited "
            f"(fix: remove it; reference the secret in the env instead: {name}: ${{{name}}})"
        )
    return None


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether `name` is on the base list (and is not a secret)."""
    return not is_secret_name(name) and any(fnmatchcase(name, p) for p in patterns)


def select(environ: Mapping[str, str], patterns: Iterable[str]) -> dict[str, str]:
    """The variables of `environ` that a server inherits under `patterns`."""
    pats = tuple(patterns)
    return {k: v for k, v in environ.items() if matches(k, pats)}


def resolve(override: Iterable[str] | None, engine_vars: Iterable[str] = ()) -> list[str]:
    """The base list of a launch: the playbook's own list, or the default plus the engine's."""
    if override is not None:
        return list(override)
    return list(dict.fromkeys([*DEFAULT_BASE_ENV, *engine_vars]))


def wire_spec(env: Mapping[str, str] | None, patterns: Iterable[str]) -> dict[str, object]:
    """What a remote wrapper needs to build the same environment on the node (see
    tools/executors/remote_shell.py): explicit values, the base list and the secret
    name rule, as one JSON-able mapping that travels in a 0600 file, never in argv."""
    return {"env": dict(env or {}), "inherit": list(patterns), "deny": SECRET_ENV.pattern, "deny_flags": "i"}
