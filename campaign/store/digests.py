"""What the journal needs to know to re-render only what changed: one digest per experiment.

Why from SQL and not from the records: an incremental journal update at experiment
1,000 must cost what it costs at experiment 10, so deciding what changed may not
decode 1,000 experiments' runs.  Every column a journal section shows either lives in
the experiment row or is final once written (runs per side and round, the verdict,
artifacts), so their counts and timestamps change exactly when the section does.
"""

from __future__ import annotations

import hashlib

from sqlalchemy import text
from sqlmodel import Session

_QUERY = text("""
SELECT e.id, e.status, e.finished_at, e.adopted, e.node, e.fingerprint_id, e.config_json, e.command,
       e.patch_sha, e.failure_json, e.baseline_ref, e.node_seconds, e.started_at, e.attempt,
       v.recorded_at, v.kind,
       (SELECT count(*) || ':' || coalesce(max(r.recorded_at), '') FROM run_sides r WHERE r.experiment_id = e.id),
       (SELECT count(*) || ':' || coalesce(max(a.created_at), '') FROM artifacts a
         WHERE a.experiment_id = e.id AND a.kind = 'analysis'),
       h.spec_json, h.source
FROM experiments e
LEFT JOIN verdicts v ON v.experiment_id = e.id
LEFT JOIN hypotheses h ON h.campaign_id = e.campaign_id AND h.name = e.hypothesis
WHERE e.campaign_id = :cid AND e.role = 'candidate'
ORDER BY e.started_at, e.id
""")


def experiment_digests(s: Session, campaign_id: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for row in s.connection().execute(_QUERY, {"cid": campaign_id}):
        out[row[0]] = hashlib.sha1(repr(tuple(row)).encode()).hexdigest()[:16]
    return out


__all__ = ["experiment_digests"]
