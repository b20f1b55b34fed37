"""Two campaigns never write one journal file: a second campaign of a playbook (`--new`)
whose journal path holds the first's journal writes `<its id>.md` beside it, the first's
human notes stay in the first's journal, and a playbook name that is not a slug (one
that would put the journal outside the project) is refused by `validate`."""

from __future__ import annotations

import json
from pathlib import Path

from campaign.journal.owner import journal_owner
from tests.campaign.sim_playbook import campaign_cli, tiny_playbook, write_playbook

ROOT = Path(__file__).resolve().parents[3]
NOTE = "A-ONLY HUMAN NOTE"


def _playbook(tmp_path: Path, name: str = "owned") -> Path:
    data = tiny_playbook(
        tmp_path,
        name,
        [{"name": "crash", "flags": {"enable-torch-symm-mem": True}}],
        journal=str(tmp_path / "journal" / "owned.md"),
        database=str(tmp_path / "state" / "c.db"),
    )
    return write_playbook(tmp_path / "pb.yaml", data)


def test_a_second_campaign_never_writes_the_firsts_journal(tmp_path: Path) -> None:
    pb, db = _playbook(tmp_path), str(tmp_path / "state" / "c.db")
    first = campaign_cli(tmp_path, "run", str(pb), "--db", db, "-q")
    assert first.returncode == 0, first.stdout + first.stderr
    journal = tmp_path / "journal" / "owned.md"
    a_id = journal_owner(journal.read_text())
    # records are the user's alone, the journal's Markdown stays readable
    state = tmp_path / "state"
    private = [
        state / "c.db",
        state / "c-checkpoints.sqlite",
        state / "ledger.jsonl",
        tmp_path / "journal" / "owned.d" / "index.sqlite",
    ]
    private += [p for p in state.glob("*-wal")] + [p for p in state.glob("*-shm")]
    modes = {str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777) for p in private}
    assert set(modes.values()) == {"0o600"}, modes
    assert journal.stat().st_mode & 0o777 == 0o644
    assert a_id and a_id.startswith("owned-")
    text = journal.read_text()
    opener = f"<!-- notes:campaign campaign:{a_id} -->\n"
    assert opener in text
    journal.write_text(text.replace(opener, f"{opener}{NOTE}\n", 1))

    second = campaign_cli(tmp_path, "run", str(pb), "--db", db, "-q", "--new")
    assert second.returncode == 0, second.stdout + second.stderr
    ids = [c["id"] for c in json.loads(campaign_cli(tmp_path, "status", "--db", db, "--json").stdout)]
    (b_id,) = [i for i in ids if i != a_id]
    b_journal = journal.with_name(f"{b_id}.md")
    assert journal_owner(journal.read_text()) == a_id and NOTE in journal.read_text()
    assert journal_owner(b_journal.read_text()) == b_id and NOTE not in b_journal.read_text()
    assert str(b_journal) in second.stdout + second.stderr  # the user is told where it is

    for cid, path in ((a_id, journal), (b_id, b_journal)):  # regenerated: each into its own file
        res = campaign_cli(tmp_path, "journal", cid, "--db", db)
        assert res.returncode == 0, res.stdout + res.stderr
        assert journal_owner(path.read_text()) == cid
    assert NOTE in journal.read_text() and NOTE not in b_journal.read_text()
    # a journal that names another campaign is never replaced, even when asked by path
    res = campaign_cli(tmp_path, "journal", b_id, "--db", db, "--out", str(journal))
    assert res.returncode == 2 and f"is the journal of campaign {a_id}" in res.stderr, res.stderr
    assert NOTE in journal.read_text()


def test_a_name_that_is_not_a_slug_is_refused(tmp_path: Path) -> None:
    pb = _playbook(tmp_path, name="../../../tmp/x/escaped-name")
    for command in ("validate", "run"):
        res = campaign_cli(tmp_path, command, str(pb))
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        (line,) = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert "name: '../../../tmp/x/escaped-name' is not a slug (fix:" in line, line
    assert not (tmp_path / "state").exists()
