"""Notes blocks: the marked parts of a journal humans write in, carried over by every
regeneration, and the keys (anchors) of the sections they belong to.

A block is `<!-- notes:KEY campaign:ID -->` .. `<!-- /notes:KEY -->`; the campaign id
says whose notes they are, so two campaigns sharing a file never take each other's.
"""

from __future__ import annotations

import re

from campaign.domain.records import CampaignView
from campaign.journal import mdsafe
from campaign.journal.mdsafe import Md

__all__ = [
    "RESERVED_KEYS",
    "NoNotes",
    "Notes",
    "experiment_key",
    "experiment_keys",
    "foreign_notes",
    "foreign_part",
    "notes_block",
    "notes_part",
    "parse_notes",
]

RESERVED_KEYS = frozenset({"campaign", "dead-ends", "environment", "reviews", "orphaned"})
# `<!-- notes:KEY campaign:ID -->`: the id says whose notes they are; markers without
# one (journals written before ids were added) belong to the campaign reading them
_OPEN = re.compile(r"^<!-- notes:([a-z0-9][a-z0-9-]*)(?: campaign:(\S+))? -->[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_UNCLOSED_STOP = re.compile(r"^(<!-- notes:[a-z0-9-]+(?: campaign:\S+)? -->|<a id=\"|## )")


def _blocks(text: str) -> list[tuple[str, str | None, str]]:
    """Every notes block as (key, campaign id or None, content), in document order.
    Markers count only at the start of a line and outside fenced code blocks, so a log
    excerpt cannot open or close a block; an unclosed block ends before the next
    generated section."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[tuple[str, str | None, str]] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            i += 1
            continue
        fm = _FENCE.match(line)
        if fm:
            fence = fm.group(1)
            i += 1
            continue
        m = _OPEN.match(line)
        if not m:
            i += 1
            continue
        key, close = m.group(1), f"<!-- /notes:{m.group(1)} -->"
        j = i + 1
        while j < len(lines) and lines[j].strip() != close:
            j += 1
        end = j
        if j == len(lines):  # closing marker deleted: stop before the next generated part
            end = next((k for k in range(i + 1, len(lines)) if _UNCLOSED_STOP.match(lines[k])), len(lines))
        content = "\n".join(lines[i + 1 : end]).strip("\n")
        if content.strip():
            out.append((key, m.group(2), content))
        i = end + 1 if j < len(lines) else end
    return out


def _joined(blocks: list[tuple[str, str]]) -> dict[str, str]:
    notes: dict[str, str] = {}
    for key, content in blocks:  # a repeated key concatenates
        notes[key] = f"{notes[key]}\n\n{content}" if key in notes else content
    return notes


def parse_notes(text: str, campaign_id: str | None) -> dict[str, str]:
    """The human notes of `campaign_id` by key, in document order: blocks marked with its
    id or with none.  A block marked with another campaign's id is never returned (see
    `foreign_notes`), so notes cannot move between campaigns.  `campaign_id` None: every
    block, whoever's."""
    return _joined([(k, c) for k, owner, c in _blocks(text) if campaign_id is None or owner in (None, campaign_id)])


def foreign_notes(text: str, campaign_id: str) -> dict[tuple[str, str], str]:
    """Notes blocks marked with another campaign's id, by (key, that id): kept as they
    are, under their own id, wherever they turn up."""
    found: dict[tuple[str, str], str] = {}
    for key, owner, content in _blocks(text):
        if owner is not None and owner != campaign_id:
            found[(key, owner)] = f"{found[(key, owner)]}\n\n{content}" if (key, owner) in found else content
    return found


def foreign_part(text: str | None, campaign_id: str) -> str:
    """Another campaign's notes blocks found in `text`, as a section to append to what
    replaces it: they stay under their own id, never read as `campaign_id`'s."""
    found = foreign_notes(text, campaign_id) if text and " campaign:" in text else {}
    parts = [
        f"\n### from section {k} of campaign {mdsafe.text(owner)}\n\n{notes_block(k, v, owner)}\n"
        for (k, owner), v in found.items()
    ]
    return (
        "\n## Orphaned notes\n\nThese notes belong to another campaign; they are kept here so nothing is lost.\n"
        + "".join(parts)
        if parts
        else ""
    )


def notes_block(key: str, content: str, campaign_id: str) -> Md:
    """The marked block humans edit; `content` is theirs and is emitted verbatim; the
    marker names the campaign whose notes they are."""
    inner = f"{content}\n" if content else ""
    return Md(f"<!-- notes:{key} campaign:{campaign_id} -->\n{inner}<!-- /notes:{key} -->")


class Notes:
    """Hands out one campaign's notes blocks during a render and remembers which keys
    were used; blocks of other campaigns found in the file are kept under their ids."""

    def __init__(
        self, existing: dict[str, str], campaign_id: str, foreign: dict[tuple[str, str], str] | None = None
    ) -> None:
        self.existing, self.used, self.campaign_id = existing, set[str](), campaign_id
        self.foreign = foreign or {}

    def block(self, key: str) -> Md:
        self.used.add(key)
        return notes_block(key, self.existing.get(key, ""), self.campaign_id)

    def has(self, key: str) -> bool:
        return bool(self.existing.get(key))

    def orphans(self) -> list[tuple[str, Md]]:
        own = [(k, notes_block(k, v, self.campaign_id)) for k, v in self.existing.items() if k not in self.used]
        return own + [
            (f"{k} of campaign {mdsafe.text(owner)}", notes_block(k, v, owner))
            for (k, owner), v in self.foreign.items()
        ]


def experiment_key(view: CampaignView, experiment_id: str) -> str:
    """Notes key and anchor of an experiment: its id without the campaign prefix, slugged."""
    short = experiment_id[len(view.id) + 1 :] if experiment_id.startswith(f"{view.id}/") else experiment_id
    key = mdsafe.slug(short)
    return f"exp-{key}" if key in RESERVED_KEYS else key


def experiment_keys(
    view: CampaignView, known: dict[str, str] | None = None, order: list[str] | None = None
) -> dict[str, str]:
    """Notes key and anchor of every experiment, unique within the campaign (a repeated
    slug gets -2, -3... in experiment order).  `known`: keys handed out before, kept when
    those experiments are still the first ones in order (a new experiment comes last),
    so an update slugs only the new ones; otherwise every key is derived again.
    `order`: every experiment's id, when `view` holds a window of the campaign."""
    ids = order if order is not None else [e.id for e in view.experiments]
    keys: dict[str, str] = {}
    if known and len(known) <= len(ids) and all(i in known for i in ids[: len(known)]):
        keys = {i: known[i] for i in ids[: len(known)]}
    taken = set(keys.values())
    for exp_id in ids[len(keys) :]:
        key, n = experiment_key(view, exp_id), 2
        while key in taken:
            key, n = f"{experiment_key(view, exp_id)}-{n}", n + 1
        keys[exp_id] = key
        taken.add(key)
    return keys


def notes_part(key: str, content: str, campaign_id: str) -> str:
    return ("**Notes:**\n\n" if content else "") + notes_block(key, content, campaign_id)


class NoNotes:
    """Sections are rendered without their notes: the notes part is added where they live."""

    def block(self, key: str) -> Md:
        return Md("")

    def has(self, key: str) -> bool:
        return False
