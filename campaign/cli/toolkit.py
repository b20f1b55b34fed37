"""`campaign bench` and `campaign simnode`: the toolkit commands of the CLI.

Imports of httpx/aiohttp/rich happen inside the commands so `campaign --help` stays fast.
Bad flags, an unreachable URL, a malformed file or failed requests print one line
(`campaign bench: ...`) on stderr and exit 2 (failed requests after the table and the
``--json`` file, which keep what was measured).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import typer

PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def _fail(message: str) -> NoReturn:
    typer.echo(f"campaign bench: {message}", err=True)
    raise typer.Exit(2)


def _int(flag: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        _fail(f"{flag}: {text!r} is not an integer")
    if value < minimum:
        _fail(f"{flag}: {value} is below {minimum}")
    return value


def _concurrency(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        _fail(f"--concurrency: {text!r} is not a comma-separated list of integers (e.g. 1,2,5,10)")
    if not levels or any(c < 1 for c in levels):
        _fail(f"--concurrency: {text!r} needs integers >= 1 (e.g. 1,2,5,10)")
    return levels


def _table(result: Any) -> Any:
    from rich.table import Table

    from campaign.cli.plain import plain

    # the model name and token source come from the server: never markup
    table = Table(
        title=plain(f"{result.model or 'server'}  prompts {result.prompt_set_hash or '-'}  time x{result.time_scale:g}")
    )
    for name in ("C", "req", "err", "tok/s", "req/s", "TTFT p50", "TTFT p99", "ITL p50", "TPOT p50", "E2E p50", "src"):
        table.add_column(name, justify="right")
    for lv in result.levels:
        table.add_row(
            str(lv.concurrency),
            str(lv.requests),
            str(lv.errors),
            f"{lv.output_tokens_per_s:.1f}",
            f"{lv.requests_per_s:.2f}",
            f"{lv.ttft_ms.p50:.1f}",
            f"{lv.ttft_ms.p99:.1f}",
            f"{lv.itl_ms.p50:.1f}",
            f"{lv.tpot_ms.p50:.1f}",
            f"{lv.e2e_ms.p50:.1f}",
            plain(lv.token_source),
        )
    return table


def _api_key(name: str | None) -> str | None:
    """The value of `--api-key-env NAME` (the key itself never goes on a command line)."""
    import os

    if name is None:
        return None
    value = os.environ.get(name)
    if not value:
        _fail(f"--api-key-env: {name} is not set (fix: export {name}=<the server's key>)")
    return value


def _run(
    url: str,
    workload: Any,
    model: str | None,
    time_scale: float | None,
    timeout_s: float,
    client: str,
    api_key: str | None = None,
) -> Any:
    import asyncio

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tools.loadgen.sweep import ProgressEvent, run_sweep

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("connecting", total=None)

        def on_progress(event: ProgressEvent) -> None:
            label = f"C={event.concurrency} {event.phase} ({event.level_index + 1}/{event.levels})"
            bar.update(task, description=label, completed=event.completed, total=event.total)

        return asyncio.run(
            run_sweep(
                url,
                workload,
                model=model,
                time_scale=time_scale,
                progress=on_progress,
                request_timeout_s=timeout_s,
                http_client=client,  # type: ignore[arg-type]
                api_key=api_key,
            )
        )


def bench(
    ctx: typer.Context,
    url: str | None = typer.Argument(None, help="server base URL, e.g. http://127.0.0.1:30000"),
    concurrency: str = typer.Option("1,2,5,10", "--concurrency", help="comma-separated concurrency levels"),
    requests_per_level: str = typer.Option("2*C", "--requests-per-level", help="an integer or an expression in C"),
    output_tokens: str = typer.Option("256", "--output-tokens", help="tokens per request (ignore_eos)"),
    prompts: str = typer.Option("fixed", "--prompts", help='fixed | diverse | a JSONL file of {"prompt": ...}'),
    prompt_tokens: str = typer.Option("512", "--prompt-tokens", help="approximate length of generated prompts"),
    warmup: str = typer.Option("1", "--warmup", help="uncounted warm-up requests per level"),
    seed: str = typer.Option("0", "--seed"),
    endpoint: str = typer.Option("completions", "--endpoint", help="completions | chat"),
    model: str | None = typer.Option(None, "--model", help="default: the first id of /v1/models"),
    time_scale: str | None = typer.Option(None, "--time-scale", help="default: /server_info time_scale, else 1"),
    timeout: str = typer.Option("600", "--timeout", help="per-request timeout, seconds"),
    client: str = typer.Option("asyncio", "--client", help="streaming HTTP client: asyncio | aiohttp | httpx"),
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", help="send the server this variable's value as its API key"
    ),
    json_out: Path | None = typer.Option(None, "--json", help="write the result as JSON"),
    import_file: Path | None = typer.Option(None, "--import", help="import an SGLang/vLLM benchmark result instead"),
) -> None:
    """Run a load sweep (or import one) and print its table."""
    from campaign.cli.plain import console
    from campaign.domain.errors import UserError

    if url is not None and url.startswith("-"):  # an unknown option was taken for the URL
        _fail(f"unknown option {url!r} (fix: see campaign bench --help)")
    if ctx.args:
        _fail(f"unexpected argument {ctx.args[0]!r} (fix: see campaign bench --help)")
    try:
        if import_file is not None:
            from tools.loadgen.bench_import import import_result

            result = import_result(import_file)
        else:
            if not url:
                _fail("a URL is required (or --import FILE)")
            result = _bench_url(
                url,
                concurrency,
                requests_per_level,
                output_tokens,
                prompts,
                prompt_tokens,
                warmup,
                seed,
                endpoint,
                model,
                time_scale,
                timeout,
                client,
                _api_key(api_key_env),
            )
    except UserError as exc:
        _fail(" ".join(exc.lines))
    console().print(_table(result))
    if json_out is not None:
        try:
            json_out.write_text(result.model_dump_json(indent=2))
        except OSError as exc:
            _fail(f"--json: cannot write {json_out} ({exc.strerror})")
    failed = _failures(result) if import_file is None else None  # an imported file's failures are its own
    if failed:
        _fail(failed)


def _failures(result: Any) -> str | None:
    """One line for the requests that failed (the table's figures count only the others)."""
    from campaign.cli.plain import visible

    failed = sum(lv.errors for lv in result.levels)
    if not failed:
        return None
    total = sum(lv.requests for lv in result.levels)
    where = ", ".join(f"C={lv.concurrency}: {lv.errors}" for lv in result.levels if lv.errors)
    sample = next((s for lv in result.levels for s in lv.error_samples), "")
    sample = " ".join(visible(sample, limit=400).split())  # a server's body: lines, escapes
    sample = sample if len(sample) <= 200 else sample[:197] + "..."
    return (
        f"{failed} of {total} requests failed ({where}); first error: {sample or 'none recorded'} "
        "(fix: check that the server is up and serving this model; the figures above count only completed requests)"
    )


def _bench_url(
    url: str,
    concurrency: str,
    requests_per_level: str,
    output_tokens: str,
    prompts: str,
    prompt_tokens: str,
    warmup: str,
    seed: str,
    endpoint: str,
    model: str | None,
    time_scale: str | None,
    timeout: str,
    client: str,
    api_key: str | None = None,
) -> Any:
    from campaign.domain.models import WorkloadSpec
    from tools.loadgen.sweep import LoadgenError

    if endpoint not in ("completions", "chat"):
        _fail(f"--endpoint: {endpoint!r} is not completions or chat")
    if client not in ("asyncio", "aiohttp", "httpx"):
        _fail(f"--client: {client!r} is not asyncio, aiohttp or httpx")
    if prompts not in ("fixed", "diverse") and not Path(prompts).is_file():
        _fail(f"--prompts: {prompts!r} is neither fixed, diverse nor an existing JSONL file")
    if not url.startswith(("http://", "https://")):
        _fail(f"URL {url!r} must start with http:// or https://")
    scale = None
    if time_scale is not None:
        try:
            scale = float(time_scale)
        except ValueError:
            _fail(f"--time-scale: {time_scale!r} is not a number")
        if scale <= 0:
            _fail("--time-scale: must be > 0")
    per_level: str | int = int(requests_per_level) if requests_per_level.strip().isdigit() else requests_per_level
    workload = WorkloadSpec(
        name="cli",
        concurrency=_concurrency(concurrency),
        prompts=prompts,
        output_tokens=_int("--output-tokens", output_tokens, 1),
        requests_per_level=per_level,
        warmup_requests=_int("--warmup", warmup, 0),
        prompt_tokens=_int("--prompt-tokens", prompt_tokens, 1),
        seed=_int("--seed", seed, 0),
        endpoint=endpoint,
    )
    try:
        return _run(url, workload, model, scale, float(_int("--timeout", timeout, 1)), client, api_key)
    except LoadgenError as exc:
        _fail(str(exc))


def simnode(ctx: typer.Context) -> None:
    """Run the simulated GPU node (every argument goes to tools.simnode)."""
    try:
        from tools.simnode.__main__ import main as simnode_main
    except ImportError as exc:
        typer.echo(f"campaign simnode: tools.simnode is not available ({exc})", err=True)
        raise typer.Exit(2) from exc
    raise typer.Exit(simnode_main(list(ctx.args)) or 0)


def register(app: typer.Typer) -> None:
    """Add `bench` and `simnode` to the root app."""
    app.command("bench", context_settings=PASS_THROUGH)(bench)
    app.command("simnode", context_settings={**PASS_THROUGH, "help_option_names": []}, add_help_option=False)(simnode)


if __name__ == "__main__":  # pragma: no cover - convenience for `python -m campaign.cli.toolkit`
    root = typer.Typer(add_completion=False)
    register(root)
    root(args=sys.argv[1:])
