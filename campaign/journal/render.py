"""The living journal: a CampaignView rendered as Markdown for the human reviewer.

`render_journal` is pure (same view and existing text -> same document) so it can run
after every verdict; humans write only inside notes blocks, which every regeneration
carries over (`campaign.journal.notes`): a block whose section disappeared moves to
"Orphaned notes" instead of being lost.  `write_journal` (`campaign.journal.files`)
replaces the file atomically so a killed render never leaves half a journal.
"""

from __future__ import annotations

import os
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel

from campaign.domain.errors import UserError
from campaign.domain.records import CampaignView, ExperimentView
from campaign.journal import mdsafe
from campaign.journal.baseline_section import baseline_context
from campaign.journal.experiment_section import evidence_context, experiment_context
from campaign.journal.files import clean_temp_files, write_journal
from campaign.journal.format import (
    DEAD_END_HEADER,
    dead_end_rows,
    fmt_duration,
    fmt_time,
    linked_table,
    row_prefix,
    scoreboard_cells,
    scoreboard_table,
    table,
)
from campaign.journal.mdsafe import Md
from campaign.journal.notes import (
    RESERVED_KEYS,
    NoNotes,
    Notes,
    experiment_key,
    experiment_keys,
    foreign_notes,
    foreign_part,
    notes_block,
    notes_part,
    parse_notes,
)
from campaign.journal.planner_section import planner_context

__all__ = [
    "RESERVED_KEYS",
    "MainParts",
    "clean_temp_files",
    "experiment_body",
    "experiment_key",
    "experiment_keys",
    "foreign_notes",
    "foreign_part",
    "notes_block",
    "notes_part",
    "parse_notes",
    "render_journal",
    "render_main",
    "update_journal",
    "write_journal",
]


# ------------------------------------------------------------------ rendering
def _finalize(value: Any) -> str:
    """Every `{{ }}` output not explicitly built as safe Markdown is escaped."""
    if isinstance(value, Md):
        return value
    return "" if value is None else mdsafe.cell(value)


@lru_cache(maxsize=2)
def _template(name: str = "journal.md.j2") -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=False,
        finalize=_finalize,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return env.get_template(name)


def experiment_body(view: CampaignView, exp: ExperimentView, number: int, key: str, plot: str | None) -> str:
    """One experiment's section up to its notes: the unit an incremental update caches."""
    return _template("experiment.md.j2").render(e=experiment_context(view, exp, key, plot, NoNotes()), number=number)


def _status(view: CampaignView) -> tuple[Md, Md | None]:
    """The status cell and, when a human must act, the exact commands."""
    reason = mdsafe.text(view.halt_reason) if view.halt_reason else ""
    if view.status == "awaiting_review":
        pending = [r for r in view.reviews if r.decision is None]
        why = reason or (mdsafe.text(pending[-1].reason) if pending else "review requested")
        cid = shlex.quote(view.id)
        cmds = mdsafe.code_block(
            [
                f"campaign resume {cid} --approve",
                f"campaign resume {cid} --reject",
                f'campaign resume {cid} --note "..."   # add a note, stay halted',
            ],
            info="sh",
        )
        return Md(f"**awaiting review**: {why}"), Md(cmds)
    if view.status == "failed":
        return Md(f"**failed**: {reason}" if reason else "**failed**"), None
    if view.status == "finished":
        return Md(f"finished: {reason}" if reason else "finished"), None
    return Md("running"), None


def deploy_block(view: CampaignView) -> Md | None:
    """The configuration to deploy now (the baseline plus the adopted wins) as the exact
    command the node launched it with, and every WIN left out with why."""
    d = view.deploy
    if d is None:
        return None
    adopted = (
        ("the baseline plus adopted " + ", ".join(mdsafe.text(h) for h in d.adopted))
        if d.adopted
        else "the baseline (no win adopted yet)"
    )
    lines = [
        f"**Configuration to deploy**: {adopted}; the command the node launched it with "
        f"(host and port are the run's), from {mdsafe.code(d.experiment_id)}:",
        "",
        mdsafe.code_block(d.command, info="sh"),
    ]
    if view.wins_not_adopted:
        lines += ["", "Wins not in it:", ""]
        lines += [
            f"- {mdsafe.text(w.hypothesis)} ({mdsafe.code(w.experiment_id)}): {mdsafe.text(w.why)}"
            for w in view.wins_not_adopted
        ]
    return Md("\n".join(lines))


class MainParts(BaseModel):
    """What the main file shows of the experiments, precomputed (and cached) per experiment."""

    ids: list[str]  # every experiment, in order
    rows: dict[str, str]  # scoreboard row prefixes by id (format.row_prefix)
    dead_rows: list[tuple[str, str]] | None = None  # dead ends: (experiment id, row prefix); None: from the view
    dead_ends_note: str | None = None  # where the dead ends the main file leaves out are
    links: dict[str, str]  # details link by id
    bodies: dict[str, str]  # sections shown in full, by id, in order
    scoreboard_ids: list[str] | None = None  # rows shown here (None: all)
    scoreboard_note: str | None = None
    experiments_note: str | None = None
    notes_elsewhere: list[str] = []  # keys whose notes live in their own page
    keys: dict[str, str] | None = None  # experiment_keys(view), when the caller has them


def render_journal(
    view: CampaignView,
    existing_text: str | None = None,
    *,
    plot_paths: dict[str, str] | None = None,
    db_label: str = "",
    generated_at: float | None = None,
) -> str:
    """The whole journal for `view` in one file, keeping every human notes block of
    `existing_text`.  `plot_paths` maps experiment ids (and `plots.OVERVIEW_KEY`) to image
    paths relative to the journal's directory; `generated_at` defaults to the view's last update."""
    plots = plot_paths or {}
    keys = experiment_keys(view)
    parts = MainParts(
        ids=[e.id for e in view.experiments],
        rows={e.id: row_prefix(scoreboard_cells(view, e, n)) for n, e in enumerate(view.experiments, 1)},
        links={e.id: f"#{keys[e.id]}" for e in view.experiments},
        bodies={
            e.id: experiment_body(view, e, n, keys[e.id], plots.get(e.id)) for n, e in enumerate(view.experiments, 1)
        },
    )
    return render_main(
        view, existing_text, parts, overview_plot=plots.get("_overview"), db_label=db_label, generated_at=generated_at
    )


def render_main(
    view: CampaignView,
    existing_text: str | None,
    parts: MainParts,
    *,
    overview_plot: str | None = None,
    db_label: str = "",
    generated_at: float | None = None,
    notes: dict[str, str] | None = None,
) -> str:
    """The main file from precomputed experiment parts (`notes`: parsed from `existing_text`
    when not given)."""
    book = Notes(
        notes if notes is not None else (parse_notes(existing_text, view.id) if existing_text else {}),
        view.id,
        foreign_notes(existing_text, view.id) if existing_text else None,
    )
    book.used.update(parts.notes_elsewhere)
    keys = parts.keys if parts.keys is not None else experiment_keys(view)
    status, commands = _status(view)
    env = view.environment.components() if view.environment else {}
    header = [
        ["node", view.node or "-"],
        ["status", status],
        [
            "environment",
            Md(", ".join(f"{mdsafe.cell(k)} {mdsafe.cell(v)}" for k, v in env.items() if v and v != "0") or "-"),
        ],
        ["experiments", str(len(parts.ids))],
        ["node time used", fmt_duration(view.node_seconds)],
        ["started / updated", f"{fmt_time(view.created_at)} / {fmt_time(view.updated_at)}"],
    ]
    experiments = []
    for exp_id, body in parts.bodies.items():
        key = keys[exp_id]
        block = book.block(key)
        experiments.append({"body": Md(body), "notes_part": Md(("**Notes:**\n\n" if book.has(key) else "") + block)})
    shown = parts.scoreboard_ids if parts.scoreboard_ids is not None else parts.ids
    context: dict[str, Any] = {
        "title": mdsafe.text(view.name),
        "description": Md(mdsafe.paragraphs(view.description)) if view.description.strip() else None,
        "header": table([Md("campaign"), mdsafe.code(view.id, in_table=True)], header),
        "commands": commands,
        "deploy": deploy_block(view),
        "halt_failure": evidence_context(view.halt_failure) if view.halt_failure else None,
        "time_scale": Md(f"{view.time_scale:g}") if abs(view.time_scale - 1.0) > 1e-9 else None,
        "campaign_notes": book.block("campaign"),
        "baseline": baseline_context(view),
        "overview_plot": overview_plot,
        "scoreboard": scoreboard_table([parts.rows[i] for i in shown], parts.links, shown) if parts.ids else None,
        "scoreboard_note": Md(parts.scoreboard_note) if parts.scoreboard_note else None,
        "experiments": experiments,
        "experiments_note": Md(parts.experiments_note) if parts.experiments_note else None,
        "dead_ends": (
            dead_end_rows(view, keys, parts.links)
            if parts.dead_rows is None
            else linked_table(
                DEAD_END_HEADER, [p for _, p in parts.dead_rows], [parts.links.get(i) for i, _ in parts.dead_rows]
            )
        )
        if (view.dead_ends if parts.dead_rows is None else parts.dead_rows)
        else None,
        "dead_ends_note": Md(parts.dead_ends_note) if parts.dead_ends_note else None,
        "dead_end_notes": book.block("dead-ends"),
        "environment_changes": [mdsafe.text(x) for x in view.environment_changes],
        "drift_notes": [mdsafe.text(x) for x in view.drift_notes],
        "reviews": table(
            ["#", "reason", "decision", "note", "decided"],
            [
                [
                    r.seq,
                    r.reason,
                    Md(mdsafe.cell(r.decision)) if r.decision else Md("**pending**"),
                    r.note or "-",
                    fmt_time(r.decided_at),
                ]
                for r in view.reviews
            ],
        )
        if view.reviews
        else None,
        "planner": planner_context(view),
        "planner_cost": table(["planner", "value"], [[k, f"{v:g}"] for k, v in view.planner_cost.items()])
        if any(v for v in view.planner_cost.values())
        else None,
        "footer": Md(
            f"generated from {mdsafe.code(db_label or 'the campaign database')} at "
            f"{fmt_time(view.updated_at if generated_at is None else generated_at)}; "
            "edit only inside notes blocks, everything else is regenerated"
        ),
    }
    context["orphans"] = book.orphans()  # after every section asked for its block
    return _template().render(**context)


def update_journal(path: str | os.PathLike[str], view: CampaignView, *, db_label: str = "", plots: bool = True) -> Path:
    """Regenerate the journal at `path` from `view`: plots beside it, notes kept."""
    target = Path(path)
    try:
        existing = target.read_text(encoding="utf-8") if target.exists() else None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"{target}: cannot read the existing journal ({exc}) "
            "(fix: restore the file or move it away; its notes blocks are kept only if readable)"
        ) from None
    from campaign.journal.owner import check_owner

    check_owner(target, existing, view.id)
    plot_paths = None
    if plots:
        from campaign.journal.plots import render_plots

        plot_paths = render_plots(view, target.parent / f"{target.stem}.plots", relative_to=target.parent)
    return write_journal(target, render_journal(view, existing, plot_paths=plot_paths, db_label=db_label))
