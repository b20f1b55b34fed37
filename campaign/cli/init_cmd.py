"""`campaign init --from-cmd "..."`: a starter playbook from the server command a user runs.

The playbook keeps the user's own flags as the baseline (no engine defaults added), sizes
the load sweep to the GPUs the server uses, and proposes three example hypotheses of that
engine.  It is loaded with the playbook loader before it is written, so what init saves
is what `campaign validate` accepts.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import typer
import yaml

from campaign.cli.cmdparse import Scalar, ServeCommand, parse_serve_command
from campaign.cli.schema_cmd import schema_line
from campaign.domain.errors import UserError

#: example ideas per engine: (name, flag, value, why); the first three the baseline does not set are used
EXAMPLES: dict[str, list[tuple[str, str, Scalar, str]]] = {
    "vllm": [
        (
            "ngram-spec",
            "speculative-config",
            '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":3,"prompt_lookup_min":1}',
            "Prompt-lookup (n-gram) speculation drafts tokens from the context: no draft model, "
            "faster decode when outputs repeat their prompts.",
        ),
        (
            "bigger-prefill-budget",
            "max-num-batched-tokens",
            16384,
            "A larger per-step token budget batches more prefill work per step: higher throughput at "
            "high concurrency, at some cost to inter-token latency.",
        ),
        (
            "fewer-running-seqs",
            "max-num-seqs",
            64,
            "A smaller cap on running sequences lowers per-step cost and latency, but queues requests "
            "at high concurrency.",
        ),
        (
            "fp8-kv-cache",
            "kv-cache-dtype",
            "fp8",
            "An fp8 KV cache holds twice the tokens: more concurrent sequences (GPUs with fp8 support).",
        ),
    ],
    "sglang": [
        (
            "lpm-schedule",
            "schedule-policy",
            "lpm",
            "Longest-prefix-match scheduling serves requests that share a cached prefix together.",
        ),
        (
            "smaller-prefill-chunks",
            "chunked-prefill-size",
            4096,
            "Smaller prefill chunks interleave prefills with decodes: smoother inter-token latency.",
        ),
        (
            "more-kv-memory",
            "mem-fraction-static",
            0.9,
            "A larger static memory fraction leaves more room for the KV cache: a larger running batch.",
        ),
        (
            "torch-compile",
            "enable-torch-compile",
            True,
            "torch.compile fuses the small-batch decode graph: faster single-stream decode, slower start.",
        ),
    ],
}

#: levels of the load sweep per GPU (C=1 is always measured)
LEVELS_PER_GPU = (4, 16, 64)
#: the sweep of a server without a GPU (the CPU build): minutes, not hours
CPU_LEVELS = (1, 4, 16)


def local_python(parsed: ServeCommand) -> str | None:
    """The interpreter a bare `vllm` or `python` on this machine's PATH runs, when it is not
    the controller's own: the campaign launches the engine with it, as the user's shell does."""
    if parsed.python is not None or "/" in parsed.launcher:
        return parsed.python
    found = shutil.which(parsed.launcher)
    if found is None:
        return None
    python = Path(found).parent / "python" if Path(found).name == "vllm" else Path(found)
    # a venv's python is a symlink to the base interpreter: compare the paths, not their targets
    if not python.is_file() or python.absolute() == Path(sys.executable).absolute():
        return None
    return str(python)


def gpu_count(parsed: ServeCommand, gpus: int | None, *, local: bool = True) -> tuple[int, str]:
    """How many GPUs the server uses (0: none found, a CPU server), and where that number
    came from.  This machine's nvidia-smi says nothing about a remote node's GPUs."""
    if gpus is not None:
        return gpus, "--gpus"
    from_cmd = parsed.gpus()
    if from_cmd is not None:
        return from_cmd, "the command's parallel sizes"
    if not local:
        return 1, "assumed for a remote node: pass --gpus N"
    try:
        res = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
        found = sum(1 for ln in res.stdout.splitlines() if ln.startswith("GPU "))
        if res.returncode == 0 and found:
            return found, "nvidia-smi"
    except (OSError, subprocess.SubprocessError):
        pass
    return 0, "nvidia-smi lists none"


def node_yaml(node: str, gpus: int) -> list[str]:
    """`local`, `ssh://[user@]host[:port]` or `slurm:PARTITION` as the playbook's node block."""
    if node == "local":
        return ["node:", "  kind: local"]
    m = re.fullmatch(r"ssh://(?:([^@/:]+)@)?([^@/:]+)(?::(\d+))?", node)
    if m:
        user, host, port = m.groups()
        return (
            ["node:", "  kind: ssh", f"  host: {_scalar(host)}"]
            + ([f"  user: {_scalar(user)}"] if user else [])
            + ([f"  port: {port}"] if port else [])
            + ["  python: python3          # the node's python (the controller's code runs there)"]
        )
    m = re.fullmatch(r"slurm:([A-Za-z0-9_.-]+)", node)
    if m:
        return [
            "node:",
            "  kind: slurm",
            f"  partition: {m.group(1)}",
            f"  gres: {_scalar(f'gpu:{gpus}' if gpus else None)}",
        ]
    raise UserError(f"--node: {node!r} is not a node (fix: use local, ssh://user@host or slurm:PARTITION)")


def _scalar(value: object) -> str:
    """One YAML scalar, quoted where YAML would misread it."""
    return str(yaml.safe_dump(value, default_flow_style=True, width=10**6)).removesuffix("\n...\n").strip()


def _slug(model: str, engine: str) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", Path(model.rstrip("/")).name.lower()).strip("-") or "server"
    return f"{base}-{engine}"


def _lengths(parsed: ServeCommand, gpus: int) -> tuple[int, int]:
    """Prompt and output tokens per request: 512 and 256 on a GPU (64 and 64 without one),
    or less, to fit the command's context length."""
    prompt, output = (512, 256) if gpus else (64, 64)
    limit = next((v for k in ("max-model-len", "context-length") if isinstance(v := parsed.flags.get(k), int)), None)
    if limit is None or limit >= 2 * (prompt + output):
        return prompt, output
    return max(8, min(prompt, limit // 2)), max(8, min(output, limit // 4))


def render(parsed: ServeCommand, *, node: str, gpus: int, gpus_from: str, schema: str) -> str:
    """The playbook text: comments say where each part came from and what to edit."""
    name = _slug(parsed.model, parsed.engine)
    levels = [1, *(c * gpus for c in LEVELS_PER_GPU)] if gpus else list(CPU_LEVELS)
    prompt, output = _lengths(parsed, gpus)
    launcher = "vllm serve" if parsed.engine == "vllm" else "python -m sglang.launch_server"
    out = [
        schema,
        f"# Written by `campaign init` from your `{launcher}` command (secrets left out).",
        "# Check it:  campaign validate THIS_FILE      Run it:  campaign run THIS_FILE",
        f"name: {name}",
        f"journal: journal/{name}.md",
        "",
        *node_yaml(node, gpus),
        "",
        "server:",
        f"  engine: {parsed.engine}",
        f"  model: {_scalar(parsed.model)}",
    ]
    if parsed.python:
        out.append(f"  python: {_scalar(parsed.python)}   # the engine's interpreter: the one your command runs")
    out += ["", "# your command's flags and environment: every hypothesis is measured against them"]
    for why in parsed.dropped:
        out.append(f"# left out: {why}")
    out.append("baseline:")
    out += _mapping("flags", parsed.flags) + _mapping("env", parsed.env)
    sized = f"to {gpus} GPU(s) ({gpus_from})" if gpus else f"for a server without a GPU ({gpus_from}: pass --gpus N)"
    out += [
        "",
        f"# load sized {sized}: one stream, then a sweep up to C={levels[-1]}",
        "workloads:",
        "  single_stream:",
        "    concurrency: [1]",
        "    prompts: fixed",
        f"    prompt_tokens: {prompt}",
        f"    output_tokens: {output}",
        "    requests_per_level: 5",
        "    warmup_requests: 1",
        "  sweep:",
        f"    concurrency: [{', '.join(map(str, levels))}]",
        "    prompts: diverse",
        f"    prompt_tokens: {prompt}",
        f"    output_tokens: {output}",
        '    requests_per_level: "max(4, 2*C)"',
        "    warmup_requests: 1",
        "",
        "verdict:",
        "  metric: output_tokens_per_s",
        "  min_effect_pct: 2",
        "",
        "budget:",
        "  max_experiments: 12",
        "  max_hours: 8",
        "",
        "# example ideas for this engine: edit them, delete them, add your own",
    ]
    out += _hypotheses(parsed)
    return "\n".join(out) + "\n"


def _mapping(key: str, values: dict[str, Scalar] | dict[str, str]) -> list[str]:
    if not values:
        return [f"  {key}: {{}}"]
    return [f"  {key}:"] + [f"    {_scalar(k)}: {_scalar(v)}" for k, v in values.items()]


def _hypotheses(parsed: ServeCommand) -> list[str]:
    picked = [e for e in EXAMPLES[parsed.engine] if e[1] not in parsed.flags][:3]
    out = ["hypotheses:"]
    for name, flag, value, why in picked:
        out += [
            f"  - name: {name}",
            f"    rationale: {_scalar(why)}",
            f"    flags: {{{_scalar(flag)}: {_scalar(value)}}}",
        ]
    return out if picked else ["hypotheses: []"]


def init(
    from_cmd: str = typer.Option(..., "--from-cmd", help='the server command you run, e.g. "vllm serve MODEL --tp 2"'),
    out: Path = typer.Option(Path("playbook.yaml"), "--out", "-o", help="where to write the playbook"),
    node: str = typer.Option("local", "--node", help="local, ssh://user@host[:port] or slurm:PARTITION"),
    gpus: int | None = typer.Option(
        None, "--gpus", min=1, help="GPUs the server uses (default: tp*pp*dp, else nvidia-smi's count)"
    ),
    force: bool = typer.Option(False, "--force", help="overwrite OUT if it exists"),
) -> None:
    """Write a starter playbook from the vLLM or SGLang command you already run."""
    from campaign.cli.wiring import check_adapters
    from campaign.playbook.load import parse_playbook_text

    try:
        if out.exists() and not force:
            raise UserError(f"{out}: already exists (fix: pass --force to overwrite it, or -o another path)")
        parsed = parse_serve_command(from_cmd)
        count, source = gpu_count(parsed, gpus, local=node == "local")
        if node == "local":
            parsed = parsed.model_copy(update={"python": local_python(parsed)})
        text = render(parsed, node=node, gpus=count, gpus_from=source, schema=schema_line(out))
        text = text.replace("THIS_FILE", str(out))
        check_adapters(parse_playbook_text(text, str(out)), str(out))  # what is saved validates
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except UserError as exc:
        for line in exc.lines:
            typer.echo(f"campaign: {line}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:
        typer.echo(f"campaign: {out}: cannot write ({exc.strerror}) (fix: choose a writable path)", err=True)
        raise typer.Exit(2) from None
    top = LEVELS_PER_GPU[-1] * count if count else CPU_LEVELS[-1]
    typer.echo(
        f"{out}: {parsed.engine} {parsed.model}, {len(parsed.flags)} baseline flags, sweep to C={top} "
        f"({count or 'no'} GPU(s)); next: campaign validate {out}"
    )


def register(app: typer.Typer) -> None:
    app.command("init")(init)
