"""Pure checks of a model's proposal against the playbook's knob space.

Nothing the model writes reaches a process unless it passes here: only declared
flags and env vars, with the declared type and range, as plain scalars with no
shell metacharacters, whitespace or control characters, and never a value that
could be read as another option.  Returns the normalised settings or the reasons.
"""

from __future__ import annotations

import math
import re

from campaign.playbook.schema import KnobSpace, KnobSpec

Scalar = str | int | float | bool | None

FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
HYPOTHESIS_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")
#: an allow-list: anything else (`;|&$`<>(){}'"\\ *?!~#`, whitespace, control
#: characters, non-ASCII look-alikes) is refused.
SAFE_VALUE = re.compile(r"^[A-Za-z0-9._:,=+/@%-]+$")
_INT = re.compile(r"^[+-]?[0-9]+$")
_NUMBER = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$")


#: SAFE_VALUE for a constrained decoder: also never a leading '-'
SAFE_VALUE_SCHEMA_PATTERN = r"^[A-Za-z0-9._:,=+/@%][A-Za-z0-9._:,=+/@%-]*$"


def value_schema(spec: KnobSpec) -> dict[str, object]:
    """The JSON schema of one knob's value: its type, bounds or choices.

    Sent in `response_format`, so an engine with constrained decoding cannot produce
    an out-of-range value; `check_setting` still validates every answer (other
    endpoints ignore the schema)."""
    if spec.type == "choice":
        return {"enum": list(spec.choices or [])}
    if spec.type == "bool":
        return {"type": "boolean"}
    if spec.type in ("int", "float"):
        out: dict[str, object] = {"type": "integer" if spec.type == "int" else "number"}
        if spec.min is not None:
            out["minimum"] = int(spec.min) if spec.type == "int" and float(spec.min).is_integer() else spec.min
        if spec.max is not None:
            out["maximum"] = int(spec.max) if spec.type == "int" and float(spec.max).is_integer() else spec.max
        return out
    return {"type": "string", "pattern": SAFE_VALUE_SCHEMA_PATTERN}


def shown(value: object, n: int = 40) -> str:
    """A model-written value quoted in a reason: its repr, cut to about `n` characters."""
    text = repr(value)
    return text if len(text) <= n else text[:n] + f"...({len(text)} chars)"


def value_text(value: Scalar) -> str:
    """The text a value becomes on a command line or in the environment."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def unsafe_reason(value: Scalar) -> str | None:
    """Why `value` may not be put on a command line or in the environment, or None."""
    if value is None:
        return "null is not a value (use unset_flags to remove a flag)"
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    text = value_text(value)
    if not text:
        return "empty value"
    if not SAFE_VALUE.match(text):
        bad = sorted({c for c in text if not re.match(r"[A-Za-z0-9._:,=+/@%-]", c)})
        shown = ", ".join(repr(c) for c in bad[:6])
        return f"unsafe characters {shown} (only letters, digits and ._:,=+/@%- are allowed)"
    if text.startswith("-") and not _NUMBER.match(text):
        return "a value may not start with '-' (it would read as another option)"
    return None


def _coerce(value: Scalar, spec: KnobSpec) -> tuple[Scalar, str | None]:
    """(normalised value, problem) for one value under its knob spec."""
    if spec.type == "int":
        if isinstance(value, bool):
            return value, "expected an integer, got a boolean"
        if (isinstance(value, float) and value.is_integer()) or (isinstance(value, str) and _INT.match(value)):
            value = int(value)
        if not isinstance(value, int):
            return value, f"expected an integer, got {shown(value)}"
    elif spec.type == "float":
        if isinstance(value, bool):
            return value, "expected a number, got a boolean"
        if isinstance(value, str) and _NUMBER.match(value):
            value = float(value)
        if not isinstance(value, (int, float)):
            return value, f"expected a number, got {shown(value)}"
    elif spec.type == "bool":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        if not isinstance(value, bool):
            return value, f"expected true or false, got {shown(value)}"
    elif spec.type == "choice":
        choices = spec.choices or []
        for choice in choices:
            if value_text(choice) == value_text(value):
                return choice, None
        return value, f"{shown(value)} is not one of {[value_text(c) for c in choices]}"
    elif not isinstance(value, (str, int, float)) or isinstance(value, bool):
        return value, f"expected a string, got {shown(value)}"
    if spec.type in ("int", "float") and isinstance(value, (int, float)):
        if spec.min is not None and value < spec.min:
            return value, f"{value} is below the minimum {spec.min:g}"
        if spec.max is not None and value > spec.max:
            return value, f"{value} is above the maximum {spec.max:g}"
    return value, None


def check_setting(kind: str, name: str, value: Scalar, space: dict[str, KnobSpec]) -> tuple[Scalar, str | None]:
    """Validate one flag or env setting: (normalised value, problem or None)."""
    pattern = FLAG_NAME if kind == "flag" else ENV_NAME
    if not pattern.match(name):
        return value, f"{kind} name {shown(name)} is malformed (must match {pattern.pattern})"
    spec = space.get(name)
    if spec is None:
        return value, f"{kind} {shown(name)} is not in the knob space (declared: {', '.join(sorted(space)) or 'none'})"
    problem = unsafe_reason(value)
    if problem:
        return value, f"{kind} {shown(name)}: {problem}"
    normalised, problem = _coerce(value, spec)
    if problem:
        return value, f"{kind} {shown(name)}: {problem}"
    return normalised, None


class CheckedSettings:
    """The normalised settings of a proposal that passed the knob checks."""

    def __init__(self, flags: dict[str, Scalar], env: dict[str, str], unset_flags: list[str]) -> None:
        self.flags = flags
        self.env = env
        self.unset_flags = unset_flags


def check_settings(
    flags: dict[str, Scalar],
    env: dict[str, Scalar],
    unset_flags: list[str],
    knobs: KnobSpace,
    allowed_flags: list[str] | None = None,
) -> tuple[CheckedSettings, list[str]]:
    """Every problem with a proposal's settings, and the normalised settings."""
    problems: list[str] = []
    out_flags: dict[str, Scalar] = {}
    out_env: dict[str, str] = {}
    for name, value in flags.items():
        normalised, problem = check_setting("flag", name, value, knobs.flags)
        if problem is None and allowed_flags is not None and name not in allowed_flags:
            problem = f"flag {shown(name)} is not in server.allowed_flags"
        if problem:
            problems.append(problem)
        else:
            out_flags[name] = normalised
    for name, value in env.items():
        normalised, problem = check_setting("env", name, value, knobs.env)
        if problem:
            problems.append(problem)
        else:
            out_env[name] = value_text(normalised)
    for name in unset_flags:
        if not FLAG_NAME.match(name) or name not in knobs.flags:
            problems.append(f"unset flag {shown(name)} is not in the knob space")
        elif name in flags:
            problems.append(f"flag {shown(name)} is both set and unset")
    return CheckedSettings(out_flags, out_env, list(unset_flags)), problems
