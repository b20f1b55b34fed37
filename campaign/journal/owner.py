"""Which campaign a journal file belongs to, so that two campaigns never write one file.

A journal's header names its campaign (`| campaign | \\`<id>\\` |`).  A campaign takes
the playbook's journal path unless another campaign's journal is already there; then
it writes `<campaign id>.md` beside it.  A path is taken by creating the file
exclusively (no link followed), so two campaigns starting at once cannot both take it,
and the writer refuses a file that names another campaign: its notes never move into
another campaign's journal.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from campaign.domain.errors import UserError

__all__ = ["check_owner", "claim_journal", "journal_owner"]

_OWNER = re.compile(r"^\| campaign \| `([^`\n]+)` \|", re.MULTILINE)
_HEAD = 8192  # the header is at the top: a long journal is not read whole for this


def journal_owner(text: str) -> str | None:
    """The campaign id a journal's header names (None: not a campaign's journal)."""
    m = _OWNER.search(text[:_HEAD])
    return m.group(1) if m else None


def _owner_of(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return journal_owner(fh.read(_HEAD).decode("utf-8", errors="replace"))


def _take(path: Path, campaign_id: str, title: str) -> bool:
    """Create `path` holding only its owner line; True when it is (now) this campaign's."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        return _owner_of(path) in (campaign_id, None)
    except OSError as exc:
        raise UserError(
            f"{path}: cannot create the journal ({exc.strerror or exc}) "
            "(fix: make its directory writable, or set `journal:` to a writable path)"
        ) from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(f"# Optimization journal: {title}\n\n| campaign | `{campaign_id}` |\n|---|---|\n")
    return True


def claim_journal(path: Path, campaign_id: str, title: str) -> Path:
    """The journal file of `campaign_id`: `path`, or `<campaign id>.md` beside it when
    `path` holds another campaign's journal (and on every later run, once it exists)."""
    own = path.with_name(f"{campaign_id}.md")
    order = [own, path] if own != path and own.exists() else [path, own]
    for candidate in dict.fromkeys(order):
        if _take(candidate, campaign_id, title):
            return candidate
    raise UserError(
        f"{path}: holds the journal of campaign {_owner_of(path)}, and {own} another's "
        f"(fix: set `journal:` in the playbook to a path of its own)"
    )


def check_owner(path: Path, text: str | None, campaign_id: str) -> None:
    """Refuse to replace a journal that names another campaign (its notes are theirs)."""
    owner = journal_owner(text) if text else None
    if owner is not None and owner != campaign_id:
        raise UserError(
            f"{path}: is the journal of campaign {owner}, not {campaign_id} (fix: campaign journal "
            f"{campaign_id} --out OTHER.md, or move that file away)"
        )
