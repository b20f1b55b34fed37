"""A campaign id as the user types it: the whole id, or any prefix that names one campaign.

`campaign status` lists ids such as `eagle-fast-verify-20261207-0759-3f2a`; typing the
first characters that tell it apart is enough for resume, show, journal and unlock.
"""

from __future__ import annotations

from pathlib import Path

from campaign.domain.errors import UserError
from campaign.domain.location import is_url, resolve


def _ids(path: Path) -> list[str] | None:
    from campaign.store.quick import campaign_list

    items = campaign_list(path)  # plain sqlite3, no sqlmodel import
    if items is None:  # an older schema: the Store migrates it first
        from campaign.store import Store

        return [r.id for r in Store(path).list_campaigns()]
    return [str(it["id"]) for it in items]


def resolve_id(given: str, db: str | None) -> str:
    """The id `given` names: itself when it is an id (or no database is there: the command
    says so), the one id it is a prefix of, or one line listing the ids it could mean."""
    where = resolve(db)
    if is_url(where):
        from campaign.store import Store

        with Store(where) as store:
            ids = [r.id for r in store.list_campaigns()]
    elif not Path(where).is_file():
        return given
    else:
        ids = _ids(Path(where)) or []
    if given in ids:
        return given
    matches = [i for i in ids if i.startswith(given)]
    if len(matches) > 1:
        raise UserError(
            f"{given}: {len(matches)} campaigns start with it: {', '.join(matches)} (fix: type more of the id)"
        )
    return matches[0] if matches else given


def resolve_side(given: str, db: str | None) -> str:
    """`ID` or `ID:EXPERIMENT` (campaign compare) with the id part resolved as above."""
    cid, colon, experiment = given.partition(":")
    return resolve_id(cid, db) + colon + experiment
