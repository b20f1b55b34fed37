"""The bridge between the graph and the planner, on a real SQLite store: every call
recorded (identical ones too), the stop named, and one `fix:` per error line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from campaign.domain.errors import UserError
from campaign.loop.planner_bridge import propose_with_planner, stop_reason
from campaign.planner import PlannerUnavailable, ProposalOutcome, Rejection
from campaign.planner.schemas import LlmCallRecord
from campaign.playbook.load import load_playbook
from campaign.store import Store
from tests.campaign.sim_playbook import sim_playbook


def call(**kw: object) -> LlmCallRecord:
    return LlmCallRecord(purpose="propose", model="m", prompt_hash="h" * 64, **kw)  # type: ignore[arg-type]


class Scripted:
    kind = "llm"

    def __init__(self, *outcomes: ProposalOutcome | Exception) -> None:
        self.outcomes = list(outcomes)

    def propose(self, ctx: object) -> ProposalOutcome:
        out = self.outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out


def deps(tmp_path: Path, planner: Scripted) -> tuple[SimpleNamespace, str]:
    pb = load_playbook(sim_playbook(tmp_path, [], planner={"kind": "llm", "model": "m", "max_proposals": 3}))
    store = Store(tmp_path / "campaign.db")
    return SimpleNamespace(store=store, playbook=pb, planner=planner), store.create_campaign(pb.name, playbook=pb).id


def gave_up(n: int) -> ProposalOutcome:
    rej = [Rejection(reason="flag 'x' is not in the knob space", raw="{}") for _ in range(n)]
    return ProposalOutcome(
        source="llm", exhausted=True, rejections=rej, calls=[call(rejection=r.reason, output_json="{}") for r in rej]
    )


def test_identical_rejected_calls_are_all_recorded_and_the_stop_is_named(tmp_path: Path) -> None:
    d, cid = deps(tmp_path, Scripted(gave_up(3), gave_up(2)))
    assert propose_with_planner(d, cid) is None
    assert stop_reason(d.store, cid) == (
        "planner stopped: 3 proposals rejected in a row (last: flag 'x' is not in the knob space)"
    )
    assert propose_with_planner(d, cid) is None
    calls = d.store.planner_calls(cid)
    assert [c.attempt for c in calls] == [0, 1, 2, 3, 4] and {c.outcome for c in calls} == {"rejected"}
    assert d.store.planner_cost(cid)["rejections"] == 5
    notes = [e.message for e in d.store.events(cid, "planner")]
    assert len(notes) == 2 and notes[1].startswith("planner stopped: 2 proposals rejected in a row")
    data = d.store.show_json(cid)
    assert len(data["planner_calls"]) == 5 and data["planner_notes"] == notes


@pytest.mark.parametrize(
    "message",
    [
        "planner: cannot connect to http://127.0.0.1:9/v1 after 2 retries (fix: check OPENAI_BASE_URL or planner.base_url)",
        "planner: http://x/v1 kept rate-limiting (HTTP 429) after 2 retries",
    ],
)
def test_an_unavailable_endpoint_is_one_line_with_one_fix(tmp_path: Path, message: str) -> None:
    failed = call(error=message)
    d, cid = deps(tmp_path, Scripted(PlannerUnavailable(message, [failed])))
    with pytest.raises(UserError) as err:
        propose_with_planner(d, cid)
    text = str(err.value)
    assert text.count("fix:") == 1 and text.count("planner:") == 1 and "\n" not in text
    [recorded] = d.store.planner_calls(cid)
    assert recorded.outcome == "failed" and recorded.reason == message
    assert d.store.planner_cost(cid)["calls"] == 1
