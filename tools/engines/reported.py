"""What a server says it runs, as a `ReportedConfig` the confound check compares.

Three sources, by engine:

- the simulated node: `/server_info` -> `{"flags": {...}, "env": {...}}`, every flag as it
  resolved it at start-up;
- SGLang: `/server_info` (or `/get_server_info`) returns its `ServerArgs` at the top level,
  every field after start-up resolution; the start-up log's `server_args=ServerArgs(...)`
  line says the same when the endpoint does not answer;
- vLLM exposes no server args over HTTP; its engine logs the resolved config at start-up
  (`Initializing a V1 LLM engine (v...) with config: model=..., dtype=torch.float32,
  max_seq_len=512, ..., enable_prefix_caching=True, ...`), which is read from the log
  (`tools.engines.startup_log`); releases without that line log their argparse
  `Namespace(...)`, which is read instead.

Settings that differ from launch to launch by construction (host, port, a random seed
the engine draws, log and socket paths) are left out, or every run would look
confounded.  A value the engine reports as a structured object (`SpeculativeConfig(...)`,
`compilation_config={...}`) is kept as text and marked opaque: two sides are compared,
but the request's spelling (JSON on the command line) is never compared with it.
Secret-named settings are masked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from campaign.domain.models import ReportedConfig
from campaign.domain.redact import MASK, SECRET_FLAG, redact_env

__all__ = ["from_server_args", "reported_flag", "scalar"]

#: per-launch fields every engine reports (argparse destinations, any spelling)
PER_LAUNCH = frozenset(
    {
        "host",
        "port",
        "nccl-port",
        "dist-init-addr",
        "random-seed",
        "served-model-name",
        "model",
        "model-path",
        "tokenizer",
        "tokenizer-path",
        "download-dir",
        "log-requests",
        "uvicorn-log-level",
        "file-storage-path",
        "metrics-port",
        "ssl-keyfile",
        "ssl-certfile",
        "root-path",
    }
)
_STRUCTURED = tuple("([{<")


def reported_flag(name: str) -> str:
    """A reported setting's name in the command line's spelling: SGLang and vLLM report
    their argparse destinations (`mem_fraction_static` for `--mem-fraction-static`)."""
    return str(name).lstrip("-").replace("_", "-")


def scalar(value: Any) -> str | int | float | bool | None:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def _engine_value(value: Any) -> tuple[str | int | float | bool | None, bool]:
    """(value as the command line would spell it, whether it is opaque).  `torch.float32`
    is `float32` on the command line; a repr of an object is opaque text."""
    if isinstance(value, str):
        if value.startswith("torch.") and value[6:].isidentifier():
            return value[6:], False
        return value, value.startswith(_STRUCTURED) or "(" in value
    if isinstance(value, (dict, list, tuple, set)):
        return scalar(value if not isinstance(value, (tuple, set)) else list(value)), True
    return scalar(value), False


def from_server_args(
    args: Mapping[str, Any],
    *,
    env: Mapping[str, Any] | None = None,
    derived: Mapping[str, Iterable[str]] | None = None,
    aliases: Mapping[str, str] | None = None,
    skip: Iterable[str] = (),
) -> ReportedConfig | None:
    """Argparse destinations (or a resolved engine config) -> ReportedConfig; None when
    there is nothing to report."""
    drop = PER_LAUNCH | {reported_flag(s) for s in skip}
    flags: dict[str, str | int | float | bool | None] = {}
    opaque: list[str] = []
    for key, raw in args.items():
        name = reported_flag(key)
        if name in drop or not name:
            continue
        value, is_opaque = _engine_value(raw)
        if value is not None and SECRET_FLAG.match("--" + name):
            value = MASK
        flags[name] = value
        if is_opaque:
            opaque.append(name)
    if not flags:
        return None
    return ReportedConfig(
        flags=flags,
        env=redact_env({str(k): str(v) for k, v in (env or {}).items()}),
        derived_from={k: list(v) for k, v in (derived or {}).items()},
        aliases=dict(aliases or {}),
        opaque=sorted(opaque),
    )
