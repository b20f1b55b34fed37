"""A record that scales: packed runs read back (times to the microsecond), a v1 file migrates, <= 20 KB per experiment."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

from bench import scale_build
from campaign.domain.models import LevelResult, Stat
from campaign.store import Store
from campaign.store.models import SCHEMA_VERSION
from campaign.store.pack import pack_levels, unpack_levels

ROOT = Path(__file__).resolve().parents[3]


def test_packed_levels_read_back_exactly_and_times_to_the_microsecond() -> None:
    levels = [
        ("single_stream", LevelResult(concurrency=1, requests=2, output_tokens_per_s=82.123456789012345,
                                      duration_s=3.1234567891,
                                      ttft_ms=Stat(mean=41.000000000000007, p50=40.1, p90=55.5004, p99=1e-300)), "ph"),
        ("parallel", LevelResult(concurrency=250, requests=500, errors=3, duration_s=12.5, token_source="chunks",
                                 requests_per_s=1e300, error_samples=["HTTP 503: overloaded"]), "ph2"),
    ]  # fmt: skip
    back = unpack_levels(pack_levels(levels))
    assert [(w, h) for w, _, h in back] == [(w, h) for w, _, h in levels]
    for (_, got, _), (_, want, _) in zip(back, levels):
        assert got.output_tokens_per_s == want.output_tokens_per_s  # rates: exact doubles
        assert got.requests_per_s == want.requests_per_s
        assert (got.concurrency, got.requests, got.errors) == (want.concurrency, want.requests, want.errors)
        assert got.token_source == want.token_source and got.error_samples == want.error_samples
        assert abs(got.duration_s - want.duration_s) <= 0.5e-6  # times: integer microseconds
        for stat in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
            for key, value in getattr(want, stat).model_dump().items():
                assert abs(getattr(getattr(got, stat), key) - value) <= 0.5e-3
    assert back[0][1].ttft_ms.p90 == 55.5 and back[0][1].duration_s == 3.123457
    assert isinstance(back[1][1].concurrency, int)


def test_a_level_packed_by_the_first_format_still_reads() -> None:
    """Databases written before times were stored in microseconds hold format-1 blobs."""
    import struct
    import zlib

    result = LevelResult(
        concurrency=4,
        requests=8,
        output_tokens_per_s=301.0000000001,
        duration_s=2.0000000003,
        ttft_ms=Stat(mean=12.3456789, p50=12.0, p90=13.0, p99=14.0),
    )
    fields = [k for k, v in result.model_dump().items() if not isinstance(v, (dict, list, str))]
    stats = [f"{k}.{s}" for k, v in result.model_dump().items() if isinstance(v, dict) for s in v]
    fields = [f for f in result.model_dump() if f in fields or any(s.startswith(f + ".") for s in stats)]
    paths = [
        p
        for f in fields
        for p in ([f] if f not in {s.split(".")[0] for s in stats} else [s for s in stats if s.startswith(f + ".")])
    ]
    dump = result.model_dump()
    values = [float(dump[p]) if "." not in p else float(dump[p.split(".")[0]][p.split(".")[1]]) for p in paths]
    head = json.dumps(
        {"v": 1, "fields": paths, "levels": [["w", "ph", {"token_source": "usage", "error_samples": []}]]}
    ).encode()
    raw = struct.pack(f"<{len(values)}d", *values)
    blob = zlib.compress(struct.pack("<I", len(head)) + head + b"".join(raw[i::8] for i in range(8)))
    [(workload, back, prompt_hash)] = unpack_levels(blob)
    assert (workload, prompt_hash) == ("w", "ph") and back.model_dump() == result.model_dump()


def test_times_in_microseconds_halve_the_packed_size() -> None:
    import random

    rng = random.Random(3)

    def stat() -> Stat:
        base = rng.uniform(5, 500)
        return Stat(
            mean=base * rng.uniform(1, 1.1), p50=base, p90=base * rng.uniform(1.1, 1.5), p99=base * rng.uniform(1.5, 3)
        )

    levels = [
        (
            "parallel",
            LevelResult(
                concurrency=c,
                requests=2 * c,
                output_tokens=256 * c,
                duration_s=rng.uniform(5, 60),
                output_tokens_per_s=rng.uniform(50, 5000),
                requests_per_s=rng.uniform(0.1, 20),
                ttft_ms=stat(),
                itl_ms=stat(),
                tpot_ms=stat(),
                e2e_ms=stat(),
            ),
            "ph",
        )
        for c in (1, 2, 4, 8, 16, 32, 64, 128)
    ]
    doubles = len(zlib_of_doubles(levels))
    assert len(pack_levels(levels)) < 0.75 * doubles, (len(pack_levels(levels)), doubles)


def zlib_of_doubles(levels: list[tuple[str, LevelResult, str]]) -> bytes:
    """What the same levels cost as format 1 (every number a double, byte planes, zlib)."""
    import struct
    import zlib

    from campaign.store.pack import _flatten

    nums = [v for _, r, _ in levels for v in _flatten(r.model_dump(mode="json"))[1]]
    raw = struct.pack(f"<{len(nums)}d", *nums)
    return zlib.compress(b"".join(raw[i::8] for i in range(8)), 6)


def _downgrade_to_v1(db: Path) -> None:
    """Rewrite a current file as schema 1 wrote it: per-level `runs` rows, plain text."""
    conn = sqlite3.connect(db)
    conn.execute("""CREATE TABLE runs (id INTEGER NOT NULL, experiment_id VARCHAR NOT NULL, side VARCHAR NOT NULL,
        repeat INTEGER NOT NULL, workload VARCHAR NOT NULL, concurrency INTEGER NOT NULL, metrics_json TEXT NOT NULL,
        output_tokens_per_s FLOAT NOT NULL, prompt_set_hash VARCHAR NOT NULL, node VARCHAR NOT NULL,
        recorded_at FLOAT NOT NULL, PRIMARY KEY (id), UNIQUE (experiment_id, side, repeat, workload, concurrency),
        FOREIGN KEY(experiment_id) REFERENCES experiments (id))""")
    for exp_id, side, repeat, blob, node, recorded_at in conn.execute("SELECT * FROM run_sides").fetchall():
        for workload, result, prompt_hash in unpack_levels(blob):
            conn.execute(
                "INSERT INTO runs (experiment_id, side, repeat, workload, concurrency, metrics_json, "
                "output_tokens_per_s, prompt_set_hash, node, recorded_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    exp_id,
                    side,
                    repeat,
                    workload,
                    result.concurrency,
                    result.model_dump_json(),
                    result.output_tokens_per_s,
                    prompt_hash,
                    node,
                    recorded_at,
                ),
            )
    conn.execute("DROP TABLE run_sides")
    import zlib

    for table, plain, packed, key in (
        ("verdicts", "detail_json", "detail_z", "experiment_id"),
        ("artifacts", "content", "content_z", "experiment_id || kind || seq"),
    ):
        rows = conn.execute(f"SELECT {key}, {packed} FROM {table} WHERE {packed} IS NOT NULL").fetchall()
        for k, z in rows:
            conn.execute(f"UPDATE {table} SET {plain} = ? WHERE {key} = ?", (zlib.decompress(z).decode(), k))
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {packed}")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


def test_a_schema_1_database_is_migrated_on_open_and_reads_the_same(tmp_path: Path) -> None:
    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 6)
    with Store(db) as store:
        before = store.show_json(cid)
        view_before = store.view(cid).model_dump()
        exp = store.list_experiments(cid, role="candidate")[0].id
        samples_before = store.level_samples(exp)
        outputs_before = store.get_artifact(exp, "outputs", seq=1)
    _downgrade_to_v1(db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] > 0  # a real v1 layout
    with Store(db) as store:
        assert store.show_json(cid) == before
        assert store.view(cid).model_dump() == view_before
        assert store.level_samples(exp) == samples_before
        assert store.get_artifact(exp, "outputs", seq=1) == outputs_before
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "runs" not in tables and "run_sides" in tables
        assert conn.execute("SELECT count(*) FROM verdicts WHERE detail_z IS NOT NULL").fetchone()[0] > 0


def test_a_week_long_campaign_costs_under_20_kb_per_experiment(tmp_path: Path) -> None:
    """2 workloads x 8 levels x 2 sides x 3 rounds per experiment, the loop's artifacts: ~100 KB
    in schema 1, ~22 KB with every number a packed double, ~15 KB with times in microseconds."""
    sizes = []
    for n in (0, 60):  # what each experiment adds, past the fixed pages of an empty campaign
        db = tmp_path / f"campaign-{n}.db"
        scale_build.build(db, n)
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        sizes.append(db.stat().st_size)
    assert (sizes[1] - sizes[0]) / 60 <= 20_000


def test_every_query_of_the_loop_and_cli_uses_an_index(tmp_path: Path) -> None:
    db = tmp_path / "campaign.db"
    Store(db).close()
    conn = sqlite3.connect(db)
    queries = [
        "SELECT * FROM experiments WHERE campaign_id = 'c' ORDER BY started_at, id",
        "SELECT * FROM experiments WHERE campaign_id = 'c' AND status = 'running'",
        "SELECT * FROM experiments WHERE campaign_id = 'c' AND hypothesis = 'h' AND attempt = 1",
        "SELECT * FROM hypotheses WHERE campaign_id = 'c' AND status = 'queued' ORDER BY position",
        "SELECT * FROM run_sides WHERE experiment_id = 'e' AND side = 'baseline'",
        "SELECT * FROM artifacts WHERE experiment_id = 'e' AND kind = 'analysis'",
        "SELECT * FROM verdicts WHERE experiment_id = 'e'",
        "SELECT * FROM events WHERE campaign_id = 'c'",
    ]
    for q in queries:
        plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {q}"))
        assert "USING" in plan and "SCAN" not in plan.replace("USING", ""), (q, plan)
        assert "TEMP B-TREE" not in plan, (q, plan)


def test_show_json_streams_the_same_document(tmp_path: Path) -> None:
    import json

    from campaign.store import show

    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 7)
    with Store(db) as store:
        whole = json.dumps(store.show_json(cid), indent=2, default=str)
        old_chunk, show.CHUNK = show.CHUNK, 3  # several chunks
        try:
            streamed = "".join(store.show_json_text(cid))
        finally:
            show.CHUNK = old_chunk
    assert streamed == whole
    assert len(json.loads(streamed)["experiments"]) == 7


def test_status_reads_the_current_schema_without_sqlmodel(tmp_path: Path) -> None:
    from campaign.store import quick

    db = tmp_path / "campaign.db"
    with Store(db) as store:
        store.create_campaign("a", playbook={"name": "a"}, campaign_id="a-1")
    assert str(SCHEMA_VERSION) == quick.SCHEMA_VERSION
    assert quick.campaign_list(db) == [{"id": "a-1", "name": "a", "status": "running", "halt_reason": None}]
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    assert quick.campaign_list(db) is None  # an older file: the Store migrates it


def test_read_only_commands_import_no_heavy_stack(tmp_path: Path) -> None:
    import subprocess

    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 2)
    probe = (
        "import sys\nfrom campaign.cli.main import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print('HEAVY', sorted(m for m in ('sqlmodel', 'langgraph', 'matplotlib', 'scipy') if m in sys.modules), "
        "file=sys.stderr)\n"
    )
    status = subprocess.run(
        [sys.executable, "-c", probe, "status", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert cid in status.stdout and "HEAVY []" in status.stderr, status.stderr
    show = subprocess.run(
        [sys.executable, "-c", probe, "show", cid, "--json", "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert "HEAVY ['sqlmodel']" in show.stderr, show.stderr  # no langgraph, matplotlib or scipy
    import json

    assert len(json.loads(show.stdout)["experiments"]) == 2


def test_the_console_script_answers_status_without_typer(tmp_path: Path) -> None:
    """The `campaign` executable lands in campaign.cli.entry: `status` is answered from
    sqlite3 before typer (most of a status line's time) is imported; anything else, or a
    database it cannot read cheaply, goes to the full command line."""
    import subprocess

    db = tmp_path / "campaign.db"
    cid = scale_build.build(db, 2)
    probe = (
        "import sys\nfrom campaign.cli.entry import main\ncode = 0\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print('LOADED', sorted(m for m in ('typer', 'sqlmodel', 'yaml') if m in sys.modules), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", probe, *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            check=False,
            env={**os.environ, "COLUMNS": "200"},
        )

    table = run("status", "--db", str(db))
    assert cid in table.stdout and "LOADED ['yaml']" in table.stderr, table.stderr
    as_json = run("status", f"--db={db}", "--json")
    assert json.loads(as_json.stdout)[0]["id"] == cid and "LOADED ['yaml']" in as_json.stderr
    typo = run("status", "--jsn", "--db", str(db))  # the full command line names the mistake
    assert typo.returncode == 2 and "--jsn" in typo.stderr and "'typer'" in typo.stderr
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    migrated = run("status", "--db", str(db), "--json")  # an older file: the Store migrates it
    assert json.loads(migrated.stdout)[0]["id"] == cid and "'sqlmodel'" in migrated.stderr
