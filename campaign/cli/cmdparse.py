"""Read the command a user already runs (`vllm serve MODEL --tp 2 ...`) into a server spec.

`campaign init --from-cmd` starts from it: the engine, the model, the interpreter, the
environment prefix and the flags, in the playbook's spelling (no leading dashes, values
typed).  What the campaign decides itself is set apart with the reason: the port and
host (each launch gets a free port on its node), the served name (readiness waits for
`/v1/models` to list the model) and secrets (never written to a playbook).
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePath

from pydantic import BaseModel, Field

from campaign.domain.errors import UserError
from campaign.domain.redact import SECRET_FLAG, is_secret_name

Scalar = str | int | float | bool

_ENV_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")

#: the module each engine's launcher is run as (`python -m MODULE`)
_MODULES = {
    "vllm.entrypoints.openai.api_server": "vllm",
    "vllm.entrypoints.cli.main": "vllm",
    "sglang.launch_server": "sglang",
}
#: the flags that name the model, per engine (vLLM also takes it as `serve`'s positional)
_MODEL_FLAGS = {"vllm": ("model",), "sglang": ("model-path", "model")}
#: single-dash short options and the long flag they stand for
_SHORT = {
    "vllm": {
        "tp": "tensor-parallel-size",
        "pp": "pipeline-parallel-size",
        "dp": "data-parallel-size",
        "q": "quantization",
        "O": "compilation-config",
    },
    "sglang": {},
}
#: the flags whose product is the number of GPUs a server uses
_PARALLEL = {
    "vllm": (("tensor-parallel-size", "tp"), ("pipeline-parallel-size", "pp"), ("data-parallel-size", "dp")),
    "sglang": (
        ("tp-size", "tensor-parallel-size", "tp"),
        ("pp-size", "pipeline-parallel-size"),
        ("dp-size", "data-parallel-size", "dp"),
    ),
}
#: flags the campaign sets per launch, and why they leave the user's command
_CAMPAIGN_OWNS = {
    "port": "each launch gets a free port on its node",
    "host": "the node decides (127.0.0.1 locally, 0.0.0.0 on a remote node)",
    "served-model-name": "the campaign waits for /v1/models to list server.model",
}


class ServeCommand(BaseModel):
    """A parsed server command: what goes into the playbook, and what was left out."""

    engine: str
    model: str
    launcher: str = ""  # the command's first word: `vllm`, `python3`, /path/to/venv/bin/python
    python: str | None = None  # the engine's interpreter, when the command names one by path
    flags: dict[str, Scalar] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    dropped: list[str] = Field(default_factory=list)  # "--port 8000: why"

    def gpus(self) -> int | None:
        """tp x pp x dp as the command sets them; None when it sets none of them."""
        product, seen = 1, False
        for names in _PARALLEL[self.engine]:
            value = next((self.flags[n] for n in names if n in self.flags), None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                product, seen = product * value, True
        return product if seen else None


def _bad(message: str) -> UserError:
    return UserError(f"--from-cmd: {message}")


def _typed(text: str) -> Scalar:
    """`2` -> 2, `0.9` -> 0.9, `true` -> True; anything else (JSON included) stays text."""
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?", text):
        return float(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def _is_value(token: str) -> bool:
    """The token after `--flag` is its value unless it is itself an option (a negative
    number is a value)."""
    return not token.startswith("-") or re.fullmatch(r"-\d+(\.\d*)?", token) is not None


def _engine_and_rest(tokens: list[str]) -> tuple[str, str | None, list[str]]:
    """(engine, interpreter path or None, the tokens after the launcher)."""
    if not tokens:
        raise _bad('no command after the environment (fix: pass the whole command, e.g. "vllm serve MODEL ...")')
    head = tokens[0]
    name = PurePath(head).name
    if name == "vllm" and len(tokens) > 1 and tokens[1] == "serve":
        python = str(PurePath(head).with_name("python")) if "/" in head else None
        return "vllm", python, tokens[2:]
    if _PYTHON.match(name):
        python = head if "/" in head else None
        if len(tokens) > 2 and tokens[1] == "-m" and tokens[2] in _MODULES:
            rest = tokens[3:]
            if tokens[2] == "vllm.entrypoints.cli.main":  # `python -m vllm.entrypoints.cli.main serve MODEL`
                if not rest or rest[0] != "serve":
                    raise _bad(
                        f"{' '.join(tokens[:4])}: only `serve` starts a server (fix: use `vllm serve MODEL ...`)"
                    )
                rest = rest[1:]
            return _MODULES[tokens[2]], python, rest
    shown = " ".join(tokens[:3])
    raise _bad(
        f"'{shown}' is not a vLLM or SGLang server command (fix: pass `vllm serve MODEL ...`, "
        "`python -m vllm.entrypoints.openai.api_server --model MODEL ...` or "
        "`python -m sglang.launch_server --model-path MODEL ...`)"
    )


def parse_serve_command(command: str) -> ServeCommand:
    """`[env] [NAME=VALUE ...] LAUNCHER [MODEL] [--flag value | --flag=value | --flag ...]`."""
    try:
        tokens = shlex.split(command)
    except ValueError as exc:
        raise _bad(f"cannot split the command: {exc} (fix: balance the quotes)") from None
    env: dict[str, str] = {}
    if tokens and tokens[0] == "env":
        tokens = tokens[1:]
    while tokens and (m := _ENV_ASSIGN.match(tokens[0])):
        env[m.group(1)] = m.group(2)
        tokens = tokens[1:]
    engine, python, rest = _engine_and_rest(tokens)
    model: str | None = None
    flags: dict[str, Scalar] = {}
    dropped: list[str] = []
    i = 0
    while i < len(rest):
        token = rest[i]
        i += 1
        if not token.startswith("-") or token in ("-", "--"):
            if model is None and engine == "vllm" and not flags:
                model = token  # `vllm serve MODEL`
                continue
            raise _bad(f"unexpected argument '{token}' (fix: write options as --name value)")
        name, eq, value = token.lstrip("-").partition("=")
        if not token.startswith("--"):
            if name not in _SHORT[engine] and name[:1] == "O" and "O" in _SHORT[engine]:  # -O3
                name, eq, value = "O", "=", name[1:]
            if name not in _SHORT[engine]:
                raise _bad(f"'{token}': a short option init cannot spell out (fix: write its long --name)")
            name = _SHORT[engine][name]
        if not eq:
            if i < len(rest) and _is_value(rest[i]):
                value = rest[i]
                i += 1
            else:
                flags[name] = True
                continue
        if name in _MODEL_FLAGS[engine]:
            model = value
        elif name in _CAMPAIGN_OWNS:
            dropped.append(f"--{name} {value}: {_CAMPAIGN_OWNS[name]}")
        elif SECRET_FLAG.match("--" + name):
            dropped.append(f"--{name}: a secret is never written to a playbook (the campaign's own server needs none)")
        else:
            flags[name] = _typed(value)
    if not model:
        fix = "vllm serve MODEL" if engine == "vllm" else "--model-path MODEL"
        raise _bad(f"the command names no model (fix: add it, e.g. `{fix}`)")
    # a secret becomes a reference: its value stays in the controller's environment
    env = {key: f"${{{key}}}" if is_secret_name(key) else value for key, value in env.items()}
    return ServeCommand(
        engine=engine, model=model, launcher=tokens[0], python=python, flags=flags, env=env, dropped=dropped
    )
