"""Config edits: merge a hypothesis over the baseline, render the argv, diff two
configs and find the differences a hypothesis did not declare.

Flag names are kept without leading dashes in a config (`cuda-graph-max-bs`) and
rendered as `--name value`.  The command line is built as a list: no value ever
passes through a shell, so a value with `;`, spaces or `$(...)` stays one literal
argv item.
"""

from __future__ import annotations

import json
import shlex
import string
from collections.abc import Iterable, Mapping
from typing import Any

from campaign.domain.errors import UserError
from campaign.domain.models import ConfigChange, EffectiveConfig

FLAGS_PLACEHOLDER = "{flags}"


def flag_name(name: str) -> str:
    """The config spelling of a flag: no leading dashes."""
    return name.lstrip("-")


def merge(
    baseline: EffectiveConfig, flags: Mapping[str, Any], env: Mapping[str, str], unset_flags: Iterable[str] = ()
) -> EffectiveConfig:
    """`baseline` with `flags`/`env` set over it and `unset_flags` removed (a new object)."""
    merged_flags = {flag_name(k): v for k, v in baseline.flags.items()}
    for key in unset_flags:
        merged_flags.pop(flag_name(key), None)
    for key, value in flags.items():
        merged_flags[flag_name(key)] = _flag_value(key, value)
    merged_env = dict(baseline.env)
    for key, value in env.items():
        merged_env[key] = str(value)
    return EffectiveConfig(flags=merged_flags, env=merged_env)


def _flag_value(key: str, value: Any) -> str | int | float | bool | None:
    """Structured values (vLLM's `--speculative-config {...}`) are kept as JSON text."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, separators=(",", ":"))
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise UserError(f"flags: {key}: unsupported value {value!r} (fix: use a string, number, boolean, list or mapping)")


def render_flags(flags: Mapping[str, Any]) -> list[str]:
    """`{"a": True, "b": 3, "c": False, "d": {...}}` -> `["--a", "--b", "3", "--d", "{...}"]`."""
    argv: list[str] = []
    for key, value in flags.items():
        name = "--" + flag_name(key)
        if value is True:
            argv.append(name)
        elif value is False or value is None:
            continue
        elif isinstance(value, (dict, list, tuple)):
            argv += [name, json.dumps(value, separators=(",", ":"))]
        else:
            argv += [name, str(value)]
    return argv


def render_argv(template: str, config: EffectiveConfig, **fmt: Any) -> list[str]:
    """The server's argv from a command template such as
    `"{python} -m sglang.launch_server --model-path {model} --port {port} {flags}"`.

    The template is split first and each token is then filled in, so a substituted
    value is exactly one argv item whatever characters it holds; `{flags}` must be a
    token of its own and expands to the rendered flag tokens.
    """
    try:
        tokens = shlex.split(template)
    except ValueError as exc:
        raise UserError(f"server.command: cannot split {template!r}: {exc} (fix: balance the quotes)") from exc
    argv: list[str] = []
    for token in tokens:
        if token == FLAGS_PLACEHOLDER:
            argv += render_flags(config.flags)
            continue
        fields = [f for _lit, f, _spec, _conv in string.Formatter().parse(token) if f is not None]
        if "flags" in fields:
            raise UserError(f"server.command: {{flags}} inside {token!r} (fix: put {{flags}} alone, between spaces)")
        missing = [f for f in fields if f not in fmt]
        if missing:
            known = ", ".join(sorted(["flags", *fmt])) or "none"
            raise UserError(f"server.command: unknown placeholder {{{missing[0]}}} (fix: use one of {known})")
        argv.append(token.format(**fmt))
    return argv


def diff(a: EffectiveConfig, b: EffectiveConfig) -> list[ConfigChange]:
    """What changes from `a` to `b`: flags (dash-insensitive) then env, sorted by key."""
    changes = _diff_maps(
        "flag", {flag_name(k): v for k, v in a.flags.items()}, {flag_name(k): v for k, v in b.flags.items()}
    )
    return changes + _diff_maps("env", dict(a.env), dict(b.env))


def _diff_maps(kind: str, before: dict[str, Any], after: dict[str, Any]) -> list[ConfigChange]:
    changes = []
    for key in sorted(before.keys() | after.keys()):
        if key not in after:
            changes.append(ConfigChange(kind=kind, key=key, before=before[key], change="removed"))
        elif key not in before:
            changes.append(ConfigChange(kind=kind, key=key, after=after[key], change="added"))
        elif _rendered(kind, key, before[key]) != _rendered(kind, key, after[key]):
            changes.append(ConfigChange(kind=kind, key=key, before=before[key], after=after[key], change="changed"))
    return changes


def _rendered(kind: str, key: str, value: Any) -> list[str]:
    """Compare what the server sees: 128 and "128" are the same flag value, True and 1 are not."""
    return render_flags({key: value}) if kind == "flag" else [str(value)]


def undeclared(changes: Iterable[ConfigChange], declared: set[str]) -> list[ConfigChange]:
    """Changes the hypothesis did not declare: what confounds an experiment.
    A flag matches a declared name with or without dashes; env names match exactly."""
    declared_flags = {flag_name(d) for d in declared}
    return [c for c in changes if not (c.key in declared_flags if c.kind == "flag" else c.key in declared)]
