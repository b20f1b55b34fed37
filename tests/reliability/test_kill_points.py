"""SIGKILL at exact windows (the `CAMPAIGN_TEST_KILL_AT` hook), then resume: for each
node that writes, after its store writes and before LangGraph saved anything of it
(`<node>:after`), and after LangGraph saved its writes but before the step's
checkpoint (`<node>:writes`, where a resume that ignored the saved writes lost the
record node's update: a skipped review gate, a finished round marked stale); between
the spawn of a server and its pid in the ledger; between "finished" in the record and
the journal render.

The playbook: a crash and an ordinary idea with interleaved rounds, a review gate
after 2 ideas without a win, so an uninterrupted run has exactly one gate.

CI runs the 24 node windows in turn in one campaign (`test_every_window_in_turn`: each
controller process is killed at the next window, exactly as a single trial aims it,
until every window has been hit; one campaign instead of 24, 1-2 minutes instead of
11).  `CAMPAIGN_EXHAUSTIVE=1` also runs each window in a campaign of its own
(`test_kill_at_every_window`), to tell which window a failure of the chain comes from."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.kill_anywhere import HYPOTHESES, write_playbook
from bench.kill_watch import (
    TAG_ENV,
    finished_experiments,
    ledger_live,
    record_facts,
    unledgered_servers,
    wait_gone,
)
from campaign.domain.killpoint import KILL_ENV
from tests.pgdb import fresh_database, scalar

ROOT = Path(__file__).resolve().parents[2]
PAIR = [h for h in HYPOTHESES if h["name"] in ("torch-symm-mem", "custom-allreduce")]

# whole campaigns (a run, a kill, resumes): minutes on 2 shared cores
pytestmark = pytest.mark.slow


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=600,
        check=False,
    )


def _cid(db: Path | str) -> str:
    return str(scalar(db, "SELECT id FROM campaigns"))


def kill_in_turn(tmp_path: Path, points: list[str], first: int = 0, *, url: str = "") -> dict:
    """One campaign; each controller process is killed at the next of `points` (its
    first occurrence in that process), resumed (--approve past the gate) until every
    point has landed and the campaign is finished; return facts.  A point that the
    process does not reach (review, stack and finish come after the gate) is aimed at
    the next process again; one never reached fails the test.  `landed`: (point, the
    index of the process it killed: 0 = the run, 1 = the resume after the gate...).
    `first`: the first process aimed at (review's writes also happen before the gate, in
    the run; 1 aims at the resume that applies the decision).  `url`: the campaign on
    that PostgreSQL database (its checkpoints too) instead of a SQLite file."""
    pb = write_playbook(tmp_path, PAIR)
    db: Path | str = url or tmp_path / "state" / "campaign.db"
    ledger = tmp_path / (".campaign" if url else "state") / "ledger.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), TAG_ENV: str(tmp_path), "NO_COLOR": "1"}
    todo, landed, unledgered, outputs = list(points), [], 0, []
    for process in range(len(points) + 8):
        started = process > 0 if url else Path(db).exists()
        args = (
            ["resume", _cid(db), "--db", str(db), "--approve", "-q"]
            if started
            else ["run", str(pb), "--db", str(db), "-q"]
        )
        res = _cli(args, tmp_path, {**env, KILL_ENV: todo[0]} if todo and process >= first else env)
        outputs.append(res.stdout + res.stderr)
        assert "Traceback" not in outputs[-1], outputs[-1][-2000:]
        if res.returncode == -signal.SIGKILL:
            landed.append((todo.pop(0), process))
            unledgered += len(unledgered_servers(tmp_path, ledger))
            continue
        assert res.returncode in (0, 3), outputs[-1][-1500:]
        if res.returncode == 0:
            break
    assert not todo, f"never reached: {todo} (landed: {landed})"
    assert res.returncode == 0, "not finished"
    return {
        "db": db,
        "ledger": ledger,
        "unledgered": unledgered,
        "outputs": outputs,
        "landed": landed,
        **record_facts(db),
    }


def check_consistent(tmp_path: Path, facts: dict) -> None:
    assert finished_experiments(facts["db"], [h["name"] for h in PAIR]) == []
    assert facts["reviews"] == 1, "a review gate was skipped or doubled (the no-win streak drifted)"
    assert facts["stale"] == 0, "a resume marked work stale that the checkpoint was in the middle of"
    assert facts["unledgered"] == 0
    from campaign.store import Store

    with Store(facts["db"]) as store:  # the loop's kept counts: what the records say from scratch
        assert store.loop_tally(_cid(facts["db"])) == store.recount_tally(_cid(facts["db"]))
    journal = (tmp_path / "journal" / "kill.md").read_text()
    assert "| status | finished" in journal and "--approve" not in journal.split("## ")[0]
    assert list(tmp_path.rglob("*.tmp")) == []
    assert ledger_live(facts["ledger"]) == 0
    assert wait_gone(tmp_path, timeout_s=5) == []


def test_kill_between_finished_and_render(tmp_path: Path) -> None:
    facts = kill_in_turn(tmp_path, ["finish:marked"])
    assert facts["landed"] == [("finish:marked", 1)]
    check_consistent(tmp_path, facts)
    assert "is finished" not in facts["outputs"][-1]  # resume ran the finish step again


def test_windows_on_postgresql(tmp_path: Path) -> None:
    """A subset of the windows with the store and the checkpoints on PostgreSQL: after a
    record's writes, after its saved writes, between a spawn and the ledger, between
    "finished" and the render."""
    with fresh_database() as url:
        facts = kill_in_turn(tmp_path, ["record:after", "record:writes", "launch:spawned#3", "finish:marked"], url=url)
        check_consistent(tmp_path, facts)


def test_kill_between_spawn_and_ledger(tmp_path: Path) -> None:
    facts = kill_in_turn(tmp_path, ["launch:spawned#3"])
    assert facts["landed"] == [("launch:spawned#3", 0)]
    check_consistent(tmp_path, facts)


NODES = ["fingerprint", "baseline", "propose", "gate", "apply", "measure", "verdict", "record", "render", "review"]
WINDOWS = [f"{n}:{w}" for n in NODES for w in ("after", "writes")] + [
    "stack:after",
    "stack:writes",
    "finish:after",
    "finish:writes",
    "launch:spawned#5",
]


WINDOWS_IN_ORDER = [p for p in WINDOWS if not p.startswith("launch:")]  # graph order; a spawn count is per process


def test_every_window_in_turn(tmp_path: Path) -> None:
    check_consistent(tmp_path, kill_in_turn(tmp_path, WINDOWS_IN_ORDER))


def test_kill_while_the_review_decision_is_saved(tmp_path: Path) -> None:
    """The chain hits review's writes before the gate (the interrupt's own); the resume
    that applies the reviewer's decision has its own window."""
    facts = kill_in_turn(tmp_path, ["review:writes"], first=1)
    assert facts["landed"] == [("review:writes", 1)]
    check_consistent(tmp_path, facts)


def test_kill_at_the_fifth_spawn(tmp_path: Path) -> None:
    facts = kill_in_turn(tmp_path, ["launch:spawned#5"])
    assert facts["landed"] == [("launch:spawned#5", 0)]
    check_consistent(tmp_path, facts)


@pytest.mark.skipif(
    os.environ.get("CAMPAIGN_EXHAUSTIVE") != "1",
    reason="each window in a campaign of its own (11 min on 2 cores): CAMPAIGN_EXHAUSTIVE=1 runs "
    "them; CI runs them in turn in test_every_window_in_turn",
)
@pytest.mark.parametrize("point", WINDOWS)
def test_kill_at_every_window(tmp_path: Path, point: str) -> None:
    # review's own writes (the decision applied) happen in the resume after the gate
    in_process = 1 if point.split(":")[0] in ("review", "stack", "finish") else 0
    facts = kill_in_turn(tmp_path, [point], first=in_process)
    assert facts["landed"] == [(point, in_process)]
    check_consistent(tmp_path, facts)
