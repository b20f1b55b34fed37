"""`campaign show --json` streamed: the document is written experiment by experiment.

Why: at 5,000 experiments the whole view (every run of every experiment) would be
built in memory before the first byte is printed.  Here one read transaction (a
consistent WAL snapshot) reads the campaign's outline once, then the runs and
verdicts of one chunk of experiments at a time; the text is exactly what
`json.dumps(Store.show_json(id), indent=2)` gives.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator

from sqlmodel import Session

from campaign.store.snapshot import read_runs, read_snapshot, read_verdicts
from campaign.store.view import build_view, experiment_json, experiment_view, show_json

__all__ = ["show_json_chunks"]

CHUNK = 200


def show_json_chunks(s: Session, campaign_id: str, *, chunk: int | None = None) -> Iterator[str]:
    chunk = chunk or CHUNK
    snap = read_snapshot(s, campaign_id, detail=set())
    head = show_json(build_view(snap))  # outline: every experiment without rows
    head["experiments"] = []
    text = json.dumps(head, indent=2, default=str)
    tail = "[]\n}"
    assert text.endswith(tail)
    yield text[: -len(tail)] + "["
    candidates = [e for e in snap.experiments if e.role == "candidate"]
    baselines = {e.id for e in snap.experiments if e.role == "baseline"}
    for start in range(0, len(candidates), chunk):
        part = candidates[start:start + chunk]
        ids = [e.id for e in part]
        snap.runs.update(read_runs(s, ids, snap.metric()))
        snap.verdicts.update(read_verdicts(s, ids))
        snap.detail = set(ids) | baselines
        for n, exp in enumerate(part, start):
            item = json.dumps(experiment_json(experiment_view(snap, exp)), indent=2, default=str)
            yield ("," if n else "") + "\n" + textwrap.indent(item, "    ")
        for i in ids:
            snap.runs[i] = []
    yield ("\n  ]\n}" if candidates else "]\n}")
