"""The configuration to deploy: the baseline plus every adopted win, as the exact command
the node launched it with.

Why from the record: the command is what the executor built and ran (the launch builder's
own output, redacted before it was stored: `campaign.loop.experiment.record_measurement`),
so the core never rebuilds a launch.  The newest finished measurement of that configuration
is the newest baseline, or an adopted win whose new baseline is not measured yet.  A WIN
that was not adopted is listed with why (`campaign.verdict.explain.next_step`).
"""

from __future__ import annotations

import shlex
import sqlite3

from campaign.domain.models import EffectiveConfig
from campaign.domain.records import DeployView, ExperimentView, Verdict, WinNotAdopted
from campaign.playbook.schema import HypothesisSpec
from campaign.store.pack import unpack_text
from campaign.verdict.explain import next_step
from campaign.verdict.stack_check import PREFIX as STACK_CHECK

__all__ = ["read_deploy", "read_wins_not_adopted"]

_SOURCE = """
SELECT id, role, config_json FROM experiments
WHERE campaign_id = ? AND status = 'finished' AND (role = 'baseline' OR adopted = TRUE)
ORDER BY coalesce(finished_at, started_at) DESC, id DESC LIMIT 1
"""
_COMMANDS = (
    "SELECT seq, content, content_z FROM artifacts WHERE experiment_id = ? AND kind = 'command' ORDER BY seq DESC"
)
_ADOPTED = "SELECT hypothesis FROM experiments WHERE campaign_id = ? AND adopted = TRUE ORDER BY started_at, id"
_WINS = """
SELECT e.id, e.hypothesis, e.status, h.spec_json FROM experiments e
JOIN verdicts v ON v.experiment_id = e.id
LEFT JOIN hypotheses h ON h.campaign_id = e.campaign_id AND h.name = e.hypothesis
WHERE e.campaign_id = ? AND e.role = 'candidate' AND v.kind = 'win' AND NOT e.adopted
ORDER BY e.started_at, e.id
"""


def read_deploy(conn: sqlite3.Connection, campaign_id: str) -> DeployView | None:
    """None until a baseline has been measured with its command recorded."""
    row = conn.execute(_SOURCE, (campaign_id,)).fetchone()
    if row is None:
        return None
    exp_id, role, config_json = row
    side = 0 if role == "baseline" else 1  # artifacts' seq = 2 * repeat + side (baseline 0, candidate 1)
    command = next(
        (
            unpack_text(content, packed)
            for seq, content, packed in conn.execute(_COMMANDS, (exp_id,))
            if seq % 2 == side
        ),
        "",
    )
    if not command:
        return None
    env = EffectiveConfig.model_validate_json(config_json).env
    prefix = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted(env.items()))
    return DeployView(
        command=f"{prefix} {command}" if prefix else command,
        experiment_id=exp_id,
        adopted=[h for (h,) in conn.execute(_ADOPTED, (campaign_id,))],
    )


def read_wins_not_adopted(conn: sqlite3.Connection, campaign_id: str) -> list[WinNotAdopted]:
    """Every WIN the baseline did not take, and why (the stack check's own runs aside)."""
    out = []
    for exp_id, hypothesis, status, spec_json in conn.execute(_WINS, (campaign_id,)):
        if hypothesis.startswith(STACK_CHECK):
            continue
        adopt = bool(spec_json) and HypothesisSpec.model_validate_json(spec_json).adopt_if_win
        exp = ExperimentView(
            id=exp_id, hypothesis=hypothesis, status=status, adopt_if_win=adopt, verdict=Verdict(kind="win", reason="")
        )
        out.append(WinNotAdopted(experiment_id=exp_id, hypothesis=hypothesis, why=next_step(exp)))
    return out
