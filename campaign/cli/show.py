"""`campaign show`: one screen per campaign, one line per experiment; one experiment's
section of the journal with `--experiment NAME`.

The lines are the `show --json` document's (the deciding level and its interval, what
happens next: `campaign.verdict.explain`); every recorded value goes through
`campaign.cli.plain` (never markup).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

from campaign.cli.plain import failure_lines, line, visible
from campaign.domain.errors import UserError
from campaign.ports.store import JournalReader

__all__ = ["print_experiment", "print_summary"]


def _fit(value: str, width: int) -> str:
    return value if len(value) <= width else value[: width - 1] + "…"


def _decided(e: dict[str, Any]) -> str:
    d = e.get("deciding_level")
    if d is not None:
        return str(d["text"])
    return "crashed" if e.get("failure_class") else "-"


def print_summary(con: Console, data: dict[str, Any]) -> None:
    """A line per experiment, cut to the terminal's width rather than wrapped."""
    con.print(
        line(
            (data["id"], "bold"),
            " status: ",
            (data["status"], ""),
            f" · {len(data['experiments'])} experiments · bar: whole interval beyond "
            f"±{data.get('min_effect_pct', 2.0):g}%",
        )
    )
    rows = [
        (str(n), visible(e["hypothesis"]), visible(e.get("label") or e.get("status") or "-"), visible(_decided(e)))
        for n, e in enumerate(data["experiments"], 1)
    ]
    head = ("#", "hypothesis", "verdict", "deciding level: candidate vs baseline")
    widths = [min(cap, max(len(r[i]) for r in [head, *rows])) for i, cap in enumerate((6, 30, 34))]
    for i, r in enumerate([head, *rows]):
        cells = [_fit(r[0], widths[0]).rjust(widths[0])] + [_fit(c, w).ljust(w) for c, w in zip(r[1:3], widths[1:])]
        text = Text("  ".join([*cells, r[3]]), style="bold" if i == 0 else "")
        text.truncate(con.width, overflow="ellipsis")
        con.print(text, no_wrap=True, crop=True)
    if data.get("halt_reason"):
        con.print(line("why: ", (data["halt_reason"], "")))
    failure = data.get("failure") or {}
    for shown in failure_lines(failure.get("deciding_lines") or [], failure.get("log_path")):
        con.print(line("  ", (shown, "")))
    rejected = sum(1 for c in data.get("planner_calls", []) if c["outcome"] != "accepted")
    if rejected:
        con.print(line(f"planner: {rejected} rejected or failed model calls (campaign show --json lists them)"))
    con.print(line("details: campaign show ", (data["id"], ""), " --experiment NAME"))


def print_experiment(con: Console, store: JournalReader, campaign_id: str, name: str) -> None:
    """The journal's section of every experiment named `name` (hypothesis or id), as the
    journal renders it; an unknown name is a user error naming the ones there are."""
    from campaign.journal.render import experiment_body, experiment_keys

    view = store.view(campaign_id)
    chosen = [(n, e) for n, e in enumerate(view.experiments, 1) if name in (e.hypothesis, e.id)]
    if not chosen:
        names = ", ".join(dict.fromkeys(e.hypothesis for e in view.experiments)) or "none yet"
        raise UserError(f"campaign show {campaign_id} --experiment: no experiment {name!r} (fix: one of: {names})")
    keys = experiment_keys(view)
    for n, e in chosen:
        con.print(Markdown(experiment_body(view, e, n, keys[e.id], None)))
