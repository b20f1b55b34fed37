"""The `campaign` command line.  Only this layer prints.

Imports of the heavy stack (langgraph, sqlmodel, openai) happen inside commands so
that `campaign --help` and `campaign validate` stay fast.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import typer

from campaign.cli import copy_cmd, init_cmd, schema_cmd
from campaign.cli.common import DB_OPT
from campaign.cli.common import fail as _fail
from campaign.cli.common import open_store as _store
from campaign.cli.compare import compare
from campaign.cli.entry import print_status
from campaign.cli.export import export
from campaign.domain.errors import UserError
from tools.executors.registry import install_node_kinds

if TYPE_CHECKING:  # heavy imports stay inside the commands
    from campaign.cli.runner import RunOutcome

# the composition root: the playbook's `node:` kinds are the executor registry's
install_node_kinds()

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Optimization campaigns for LLM inference servers.",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"campaign {version('campaign')}")
        except PackageNotFoundError:  # a checkout on PYTHONPATH, not installed
            typer.echo("campaign (not installed: run `pip install -e .` for a version)")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="print the version and exit"
    ),
) -> None:
    """Optimization campaigns for LLM inference servers."""


ID_ARG = typer.Argument(..., help="campaign id, or any prefix of it that names one campaign (campaign status)")


def _outcome(out: RunOutcome) -> None:
    from campaign.cli.plain import console, failure_lines, line

    con = console(highlight=False)
    con.soft_wrap = True  # whole lines in a log, as the live view's
    if out.status == "awaiting_review":
        con.print(line((f"campaign {out.campaign_id} halted for review:", "bold yellow"), " ", (out.reason, "")))
        con.print(line("journal: ", (out.journal, "")))
        con.print(
            f"resume:  campaign resume {out.campaign_id} --approve [--note TEXT] [--set node.cuda=13.0] "
            f"[--add-hypothesis FILE]\n stop:    campaign resume {out.campaign_id} --reject"
        )
    elif out.status == "interrupted":
        con.print(
            line(
                (f"campaign {out.campaign_id} stopped (", "bold"),
                (out.reason, "bold"),
                ("); every recorded result is kept.", "bold"),
            )
        )
        con.print(f"resume:  campaign resume {out.campaign_id}")
        sys.stdout.flush()
        sys.stderr.flush()
        # the interrupted node's worker thread would finish its measurement before a normal
        # exit: its servers are already stopped and the checkpoint is on disk, so leave now
        # (the plots not yet drawn are drawn by the next journal update)
        if "campaign.journal.plot_worker" in sys.modules:
            sys.modules["campaign.journal.plot_worker"].cancel()
        os._exit(out.exit_code)
    elif out.status == "failed":
        con.print(line((f"campaign {out.campaign_id} failed:", "bold red"), " ", (out.reason, "")))
        if out.failure is not None:
            for text in failure_lines(out.failure.evidence, out.failure.log_path):
                con.print(line("  ", (text, "")))
        con.print(line("journal: ", (out.journal, "")))
    else:
        con.print(line((f"campaign {out.campaign_id} finished", "bold green"), ": ", (out.reason, "")))
        con.print(line("journal: ", (out.journal, "")))
    raise typer.Exit(out.exit_code)


@app.command()
def run(
    playbook: str = typer.Argument(..., help="playbook YAML"),
    db: str | None = DB_OPT,
    new: bool = typer.Option(False, "--new", help="start a new campaign even if one is unfinished"),
    quiet: bool = typer.Option(False, "--quiet", "-q"),
) -> None:
    """Start (or continue) the campaign a playbook describes."""
    from campaign.cli.live import LiveView
    from campaign.cli.runner import start_campaign

    live = LiveView(quiet=quiet)
    try:
        out = start_campaign(playbook, db=db, events=live, new=new)
    except UserError as exc:
        live.close()
        _fail(exc)
    live.close()
    _outcome(out)


def _parse_sets(sets: list[str]) -> dict[str, str]:
    out = {}
    for s in sets:
        if "=" not in s:
            raise UserError(f"--set {s}: expected FIELD=VALUE (fix: e.g. --set node.cuda=13.0)")
        k, v = s.split("=", 1)
        out[k.strip()] = v.strip()
    return out


@app.command()
def resume(
    campaign_id: str = ID_ARG,
    db: str | None = DB_OPT,
    approve: bool = typer.Option(False, "--approve", help="approve what the review gate asks"),
    reject: bool = typer.Option(False, "--reject", help="reject it (at a campaign review: stop)"),
    note: str = typer.Option("", "--note", help="reviewer's note, kept in the record and journal"),
    add_hypothesis: str | None = typer.Option(None, "--add-hypothesis", help="YAML file of hypotheses"),
    set_: list[str] = typer.Option([], "--set", help="override a playbook field, e.g. node.cuda=13.0"),
    playbook: str | None = typer.Option(None, "--playbook", help="playbook path if it moved"),
    quiet: bool = typer.Option(False, "--quiet", "-q"),
) -> None:
    """Continue a campaign halted for review, or one that crashed or was killed."""
    from campaign.cli.ids import resolve_id
    from campaign.cli.live import LiveView
    from campaign.cli.runner import resume_campaign

    live = LiveView(quiet=quiet)
    try:
        if approve and reject:
            raise UserError("--approve and --reject: choose one (fix: pass only one of them)")
        decision = "approve" if approve else "reject" if reject else None
        campaign_id = resolve_id(campaign_id, db)
        out = resume_campaign(
            campaign_id,
            db=db,
            decision=decision,
            note=note,
            add_hypothesis=add_hypothesis,
            overrides=_parse_sets(set_),
            playbook_path=playbook,
            events=live,
        )
    except UserError as exc:
        live.close()
        _fail(exc)
    live.close()
    _outcome(out)


@app.command()
def status(db: str | None = DB_OPT, as_json: bool = typer.Option(False, "--json")) -> None:
    """Every campaign in the database: id, name, status."""
    from pathlib import Path

    from campaign.domain.location import is_url, redact, resolve
    from campaign.store.quick import campaign_list, stale_journals

    try:
        where = resolve(db)
    except UserError as exc:
        _fail(exc)
    path = Path(where)
    items = campaign_list(path) if not is_url(where) and path.is_file() else None  # plain sqlite3: no sqlmodel import
    stale = stale_journals(path) if items is not None else None
    if items is None or stale:  # a journal a kill left older than its record is rendered again
        try:
            store = _store(db)
            rows = store.list_campaigns()
        except UserError as exc:
            _fail(exc)
        from campaign.cli.runner import repair_journal

        for r in rows:
            if stale is None or r.id in stale:
                repair_journal(store, r.id, db_label=redact(where))
        items = [{"id": r.id, "name": r.name, "status": r.status, "halt_reason": r.halt_reason} for r in rows]
    print_status(items, as_json)


@app.command()
def show(
    campaign_id: str = ID_ARG,
    db: str | None = DB_OPT,
    as_json: bool = typer.Option(False, "--json"),
    experiment: str | None = typer.Option(
        None, "--experiment", help="one experiment in full (hypothesis name or experiment id)"
    ),
) -> None:
    """One campaign, a line per experiment: its verdict and the level that decided it."""
    from campaign.cli.ids import resolve_id

    try:
        campaign_id = resolve_id(campaign_id, db)
    except UserError as exc:
        _fail(exc)
    if as_json:  # streamed: the first experiment is printed before the last is read
        try:
            store = _store(db)
            store.get_campaign(campaign_id)
            for piece in store.show_json_text(campaign_id):
                sys.stdout.write(piece)
            sys.stdout.write("\n")
        except UserError as exc:
            _fail(exc)
        return
    from campaign.cli.plain import console
    from campaign.cli.show import print_experiment, print_summary

    con = console(highlight=False)  # a row per experiment, cut to a terminal's width; whole in a pipe
    try:
        store = _store(db)
        if experiment is not None:
            store.get_campaign(campaign_id)
            print_experiment(con, store, campaign_id, experiment)
        else:
            store.get_campaign(campaign_id)  # the document from the stored pieces (built and stored where missing)
            print_summary(con, json.loads("".join(store.show_json_text(campaign_id))))
    except UserError as exc:
        _fail(exc)


@app.command()
def journal(
    campaign_id: str = ID_ARG,
    db: str | None = DB_OPT,
    out: str | None = typer.Option(None, "--out", help="write here instead of the playbook's path"),
) -> None:
    """Regenerate a campaign's journal from the database and print its path."""
    from pathlib import Path

    from campaign.cli.ids import resolve_id
    from campaign.domain.location import is_url, redact, resolve
    from campaign.journal.owner import claim_journal
    from campaign.journal.publish import publish_journal
    from campaign.playbook.load import load_playbook
    from campaign.store.reader import open_reader

    try:  # the plain-sqlite3 reader when it can (no sqlmodel import), else the Store (migrates, names the fix)
        campaign_id = resolve_id(campaign_id, db)
        where = resolve(db)
        store = (None if is_url(where) else open_reader(Path(where))) or _store(db)
        row = store.get_campaign(campaign_id)
        path = (
            Path(out) if out else claim_journal(Path(load_playbook(row.playbook_path).journal), campaign_id, row.name)
        )
        publish_journal(store, campaign_id, path, db_label=redact(where))
        _wait_for_plots()
    except UserError as exc:
        _fail(exc)
    except KeyboardInterrupt:  # every file is replaced atomically: the old journal or the new one
        from campaign.journal import plot_worker

        dropped = plot_worker.cancel()
        typer.echo(
            f"campaign: interrupted; {dropped} plots were not drawn "
            f"(fix: run `campaign journal {campaign_id}` again to finish the journal)",
            err=True,
        )
        raise typer.Exit(130) from None
    typer.echo(str(path))


def _wait_for_plots() -> None:
    """The plots are drawn by worker processes: wait for them with a progress bar (a
    1,000-experiment journal has 1,000 plots).  A plot that fails is reported and left
    out; the next `campaign journal` draws the plots still missing."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from campaign.cli.plain import console
    from campaign.journal import plot_worker

    total = plot_worker.outstanding()
    if not total:
        return
    err = console(stderr=True, highlight=False)
    with Progress(
        TextColumn("drawing plots"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task("plots", total=total)
        while (left := plot_worker.outstanding()) > 0:
            bar.update(task, completed=total - left)
            time.sleep(0.2)
    try:
        plot_worker.wait_idle()
    except Exception as exc:  # a plot is not a record: say so and go on
        typer.echo(
            f"campaign: a plot could not be drawn ({type(exc).__name__}: {exc}); the journal is written "
            "(fix: run `campaign journal` again)",
            err=True,
        )


@app.command()
def serve(
    db: str | None = DB_OPT,
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        help="address to listen on; any but loopback needs CAMPAIGN_SERVE_TOKEN in the environment",
    ),
    port: int = typer.Option(8765, "--port", help="port to listen on (0: any free one)"),
) -> None:
    """A read-only web view of the database, following running campaigns live."""
    from pathlib import Path

    from campaign.cli.web.serve import serve as run_server
    from campaign.domain.location import is_url, redact, resolve

    try:
        where = resolve(db)
        _store(db).close()  # the path exists and is a campaign database (migrated as every command does)
        run_server(where if is_url(where) else Path(where), host=host, port=port, db_label=redact(where))
    except UserError as exc:
        _fail(exc)


@app.command()
def unlock(campaign_id: str = ID_ARG, db: str | None = DB_OPT) -> None:
    """Release a run lock held by a process on another host."""
    from campaign.cli.ids import resolve_id

    try:
        campaign_id = resolve_id(campaign_id, db)
        store = _store(db)
        store.get_campaign(campaign_id)
        released = store.release_run_lock(campaign_id, "", force=True)
    except UserError as exc:
        _fail(exc)
    typer.echo(f"{campaign_id}: lock {'released' if released else 'was not held'}")


@app.command()
def validate(playbook: str) -> None:
    """Check a playbook; one line per problem, exit 2 when there is any."""
    from campaign.cli.wiring import check_adapters
    from campaign.playbook.load import load_playbook

    try:
        pb = load_playbook(playbook)
        check_adapters(pb, playbook)
    except UserError as exc:
        _fail(exc)
    typer.echo(
        f"{playbook}: ok ({pb.name}: {len(pb.hypotheses)} hypotheses, {len(pb.workloads)} workloads, "
        f"node {pb.node.kind})"
    )
    from campaign.cli.checks import remote_notes

    for note in remote_notes(pb):
        typer.echo(f"{playbook}: {note}")


app.command()(export)
app.command()(compare)
init_cmd.register(app)
schema_cmd.register(app)
copy_cmd.register(app)


@app.command()
def plan(playbook: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Print each launch's server command and env (secrets masked) and the load, starting nothing."""
    from campaign.cli.plan import make_plan, render_plan
    from campaign.cli.wiring import check_adapters
    from campaign.playbook.load import load_playbook

    try:
        pb = load_playbook(playbook)
        check_adapters(pb, playbook)
        result = make_plan(pb, playbook)
    except UserError as exc:
        _fail(exc)
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    for text in render_plan(result):
        typer.echo(text)


def _click_exceptions() -> Any:
    """typer >= 0.23 vendors click as typer._click; older releases use click itself."""
    try:
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - older typer
        from click import exceptions  # type: ignore[no-redef]
    return exceptions


def usage_line(exc: Exception) -> str:
    """One line for a command-line usage error: what is wrong, and where the fix is."""
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else "campaign"
    msg = " ".join(exc.format_message().split()) if hasattr(exc, "format_message") else str(exc)
    return f"{path}: {msg} (fix: see '{path} --help')"


def full_app() -> typer.Typer:
    """The app with the toolkit commands too (registered once, when a command line runs)."""
    from campaign.cli.toolkit import register as register_toolkit

    if not any(c.name == "bench" for c in app.registered_commands):
        register_toolkit(app)
    return app


def main(argv: list[str] | None = None) -> None:
    full_app()
    ex = _click_exceptions()
    try:
        rv = app(args=argv, prog_name="campaign", standalone_mode=False)
    except ex.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `campaign`: typer has shown the help
            sys.exit(0)
        print(usage_line(exc), file=sys.stderr)
        sys.exit(2)
    except ex.ClickException as exc:
        print(f"campaign: {' '.join(exc.format_message().split())}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except UserError as exc:  # raised outside a command body
        for line in exc.lines:
            print(f"campaign: {line}", file=sys.stderr)
        sys.exit(exc.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
