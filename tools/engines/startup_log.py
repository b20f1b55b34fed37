"""What a server says it runs with, read from its start-up log (the effective config).

The flags a campaign passes are not always what the engine runs: defaults move between
releases, and engines resolve `auto`s at start-up.  Both engines log it:

- vLLM (0.11+): `non-default args: {'host': ..., 'max_model_len': 512}` (a Python dict
  literal of what the command line set); before that `args: Namespace(host=..., ...)`;
  and the engine line `Initializing a V1 LLM engine (v0.32.0) with config: model='...',
  dtype=torch.float32, max_seq_len=512, ...` (V0: `Initializing an LLM engine (v0.5.4)`),
  plus `vLLM API server version 0.7.3` in older releases.
- SGLang: `server_args=ServerArgs(model_path='...', tp_size=1, mem_fraction_static=0.86, ...)`
  (the dataclass repr, every field).

Values are Python reprs; those that are literals become Python values, the others
(`torch.float32`, `auto`, nested config objects) stay strings.  Issue-thread logs are often
cut mid-line: a cut line yields the fields before the cut.
Checked against real logs: tests/tools/engines/real_formats/startup.  Each engine's
profile names its reader (`EngineProfile.startup_reader`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

_VLLM_ENGINE = re.compile(r"Initializing an? (?:V1 )?LLM engine \(v(?P<version>[^)]+)\) with config: (?P<body>.*)$")
_VLLM_VERSION = re.compile(r"vLLM API server version (?P<version>\S+)")
_VLLM_NON_DEFAULT = re.compile(r"non-default args: (?P<body>\{.*)$")
_VLLM_NAMESPACE = re.compile(r"\bargs: Namespace\((?P<body>.*)$")
_SGLANG_ARGS = re.compile(r"server_args=ServerArgs\((?P<body>.*)$")
_OPEN, _CLOSE = "([{", ")]}"


class StartupConfig(BaseModel):
    """`args`: what the command line set; `resolved`: the config the engine reports."""

    engine: str
    version: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    resolved: dict[str, Any] = Field(default_factory=dict)


def _value(text: str) -> Any:
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def _top_level_items(body: str) -> list[str]:
    """Split `a=1, b='x, y', c={...}` at top-level commas (quotes and brackets nest)."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(body):
        if quote:
            if ch == quote and body[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            if depth == 0:  # the closing paren of Namespace(...)/ServerArgs(...)
                items.append(body[start:i])
                return [s for s in items if s.strip()]
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    if depth == 0 and not quote:  # a line cut between two fields keeps its last one
        items.append(body[start:])
    return [s for s in items if s.strip()]


def parse_keywords(body: str) -> dict[str, Any]:
    """`k=v, ...` (a repr of keyword fields) -> dict; a field cut by the log's end is dropped."""
    out: dict[str, Any] = {}
    for item in _top_level_items(body):
        key, sep, value = item.partition("=")
        if sep and key.strip().isidentifier():
            out[key.strip()] = _value(value)
    return out


def _dict_literal(body: str) -> dict[str, Any]:
    value = _value(body)
    if isinstance(value, dict):
        return value
    inner = body.strip()[1:]  # cut mid-dict: keep the complete `'k': v` pairs
    out: dict[str, Any] = {}
    for item in _top_level_items(inner):
        key, sep, val = item.partition(":")
        k = _value(key)
        if sep and isinstance(k, str):
            out[k] = _value(val)
    return out


def read_vllm_startup(lines: Iterable[str]) -> StartupConfig:
    config = StartupConfig(engine="vllm")
    for line in lines:
        if m := _VLLM_ENGINE.search(line):
            config.version = m["version"]
            config.resolved = parse_keywords(m["body"])
        elif m := _VLLM_NON_DEFAULT.search(line):
            config.args = _dict_literal(m["body"])
        elif m := _VLLM_NAMESPACE.search(line):
            config.args = parse_keywords(m["body"])
        elif (m := _VLLM_VERSION.search(line)) and config.version is None:
            config.version = m["version"]
    return config


def read_sglang_startup(lines: Iterable[str]) -> StartupConfig:
    config = StartupConfig(engine="sglang")
    for line in lines:
        if m := _SGLANG_ARGS.search(line):
            config.resolved = parse_keywords(m["body"])  # every field: what was set is not told apart
    return config
