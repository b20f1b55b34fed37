"""Secrets never reach a record: a real campaign on the simulated node runs with tokens
in the controller's environment and referenced from the playbook's env (baseline and
hypothesis, `NAME: ${NAME}`), then every byte of every file it wrote (database, WAL,
checkpoints, journal, plots, ledger, server logs) and its terminal output are searched
for the secret values.  A secret written literally into a playbook is refused.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _secret(prefix: str = "") -> str:
    return prefix + secrets.token_hex(12)


def _playbook(tmp_path: Path, baseline_env: dict[str, str], hyp_env: dict[str, str]) -> Path:
    data = {
        "name": "secrets",
        "journal": str(tmp_path / "journal" / "secrets.md"),
        "database": str(tmp_path / "state" / "campaign.db"),
        "node": {"kind": "simulated", "seed": 1, "time_scale": 400, "noise_pct": 1.0},
        "server": {"engine": "simulated", "model": "sim-model", "startup_timeout_s": 120,
                   "command": "{python} -m tools.simnode --host {host} --port {port} --profile {profile} "
                              "--cuda {cuda} --seed {seed} --time-scale {time_scale} --noise-pct {noise_pct} "
                              "--model-path {model} --tp 8 {flags}"},
        "baseline": {"flags": {"cuda-graph-max-bs": 512}, "env": baseline_env},
        "workloads": {"single": {"concurrency": [1, 2], "output_tokens": 16, "requests_per_level": 2,
                                 "warmup_requests": 0}},
        "verdict": {"repeats": {"min": 1, "max": 1}, "interleave": False,
                    "correctness": {"prompts": 2, "max_tokens": 8}},
        "hypotheses": [
            {"name": "nccl-tree-with-token", "env": {"NCCL_ALGO": "Tree", **hyp_env}},
            {"name": "symm-mem-crash", "flags": {"enable-torch-symm-mem": True}},
        ],
    }
    path = tmp_path / "playbook" / "secrets.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _files_holding(root: Path, values: dict[str, str], skip: Path) -> list[str]:
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p != skip):
        data = path.read_bytes()
        for name, value in values.items():
            if value.encode() in data:
                found.append(f"{path.relative_to(root)}: {name}")
    return found


def _run(tmp_path: Path, pb: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "campaign.cli.main", "run", str(pb), "--db",
                           str(tmp_path / "state" / "campaign.db")], cwd=tmp_path, env=full, text=True,
                          capture_output=True, timeout=240)


def _packed_values(db: Path) -> list[bytes]:
    """The database's compressed columns (campaign.store.pack), decompressed: a byte scan of
    the file alone cannot see into them."""
    con = sqlite3.connect(db)
    out = [zlib.decompress(blob) for table, column in (("artifacts", "content_z"), ("verdicts", "detail_z"),
                                                        ("run_sides", "levels"))
           for (blob,) in con.execute(f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL")]
    con.close()
    return out


def test_no_secret_reaches_any_record(tmp_path: Path) -> None:
    in_env = {"HF_TOKEN": _secret("hf_"), "OPENAI_API_KEY": _secret("sk-"), "MY_SERVICE_SECRET": _secret(),
              "SOME_TOKEN": _secret(), "BASELINE_AUTH_TOKEN": _secret(), "HYPOTHESIS_API_TOKEN": _secret(),
              "CHANNELS": "4"}
    baseline_env = {"BASELINE_AUTH_TOKEN": "${BASELINE_AUTH_TOKEN}", "MY_SERVICE_SECRET": "${MY_SERVICE_SECRET}",
                    "NCCL_MIN_NCHANNELS": "${CHANNELS}"}
    hyp_env = {"HYPOTHESIS_API_TOKEN": "${HYPOTHESIS_API_TOKEN}", "HF_TOKEN": "${HF_TOKEN}",
               "NCCL_ALGO": "Tree"}
    pb = _playbook(tmp_path, baseline_env, hyp_env)
    res = _run(tmp_path, pb, in_env)
    assert res.returncode == 0, res.stdout + res.stderr
    # the run really happened: a record, a journal with both hypotheses, server logs
    db = tmp_path / "state" / "campaign.db"
    assert db.exists() and (tmp_path / "state" / "campaign-checkpoints.sqlite").exists()
    journal = (tmp_path / "journal" / "secrets.md").read_text()
    assert "nccl-tree-with-token" in journal and "symm-mem-crash" in journal
    assert list(tmp_path.rglob("*.log")), "no server logs were written"
    secret_values = {k: v for k, v in in_env.items() if k != "CHANNELS"}
    leaks = _files_holding(tmp_path, secret_values, skip=pb)
    leaks += [f"terminal output: {k}" for k, v in secret_values.items() if v in res.stdout + res.stderr]
    packed = _packed_values(db)
    assert packed, "the database holds no compressed values: this scan would check nothing"
    leaks += [f"campaign.db (compressed): {k}" for k, v in secret_values.items() if any(v.encode() in b for b in packed)]
    assert not leaks, "secrets found in: " + "; ".join(leaks)
    # the references were expanded at launch: the server reports the NCCL_MIN_NCHANNELS it was given
    con = sqlite3.connect(db)
    reported = " ".join(zlib.decompress(z).decode() if z else c for c, z in
                        con.execute("SELECT content, content_z FROM artifacts WHERE kind='reported_config'"))
    con.close()
    assert '"NCCL_MIN_NCHANNELS":"4"' in reported.replace(" ", ""), reported[-300:]
    assert "${HYPOTHESIS_API_TOKEN}" in journal  # the record says which variable was set, not its value


def test_literal_secret_in_playbook_refused(tmp_path: Path) -> None:
    token = _secret("hf_")
    pb = _playbook(tmp_path, {}, {"HF_TOKEN": token})
    res = _run(tmp_path, pb, {})
    assert res.returncode == 2 and "Traceback" not in res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert "hypotheses[0].env.HF_TOKEN" in line and "${HF_TOKEN}" in line and token not in line
    assert not (tmp_path / "state" / "campaign.db").exists()


def test_missing_reference_stops_with_one_line(tmp_path: Path) -> None:
    pb = _playbook(tmp_path, {"ABSENT_TOKEN": "${ABSENT_TOKEN}"}, {})
    env = {k: v for k, v in os.environ.items() if k != "ABSENT_TOKEN"}
    res = subprocess.run([sys.executable, "-m", "campaign.cli.main", "run", str(pb)], cwd=tmp_path,
                         env={**env, "PYTHONPATH": str(ROOT)}, text=True, capture_output=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "export ABSENT_TOKEN" in res.stderr
