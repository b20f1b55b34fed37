"""The default demo, N times over, as a user runs it: how often does it tell the seeds' story?

Each run is `campaign run playbooks/eagle_verify.yaml` in its own directory (to the review
gate, exit 3), then `campaign resume ID --approve --set node.cuda=13.0` (to the end), both
through the CLI in fresh processes.  A run tells the story when:

- before the gate: smaller-cuda-graph WIN and adopted; the four CUDA-bound or EP ideas
  DEAD END with the seeds' failure classes; custom all-reduce DEAD END; fewer NCCL
  channels INCONCLUSIVE (confounded by mem-fraction-static); EAGLE-3 DEAD END;
- after the CUDA 13 resume: FlashInfer all-reduce fusion and torch symmetric memory WIN;
  EAGLE-3 DEAD END winning the fixed-prompt single stream and losing the sweep at every C.

    python bench/demo_runs.py [--runs 10] [--workers 2] [--offsets seeded|fresh] [--json FILE] [--keep DIR]

`--keep DIR` keeps each run's directory (`DIR/run-N`: its database `c.db` and its journal)
so a count can be audited afterwards; without it the runs go to a temporary directory.

Runs go `--workers` at a time (the simulated node measures on its own clock, so runs
side by side do not change each other's figures).  Prints one Markdown row per run and
the count; exit 1 unless every run told the story.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PLAYBOOK = ROOT / "playbooks" / "eagle_verify.yaml"
DEAD_ENDS = {
    "flashinfer-allreduce-fusion": "jit_error",
    "nccl-tree": "cuda_graph_incompatible",
    "torch-symm-mem": "unsupported_arch",
    "ep-flashinfer-a2a": "assertion",
}


def _cli(cwd: Path, *args: str, timeout: float = 3000) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    return subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _attempts(cwd: Path, cid: str) -> dict[str, list[dict[str, Any]]]:
    shown = _cli(cwd, "show", cid, "--db", "c.db", "--json")
    out: dict[str, list[dict[str, Any]]] = {}
    for e in json.loads(shown.stdout)["experiments"]:
        if e["hypothesis"] != "baseline" and e["verdict"]:
            out.setdefault(e["hypothesis"], []).append(e)
    return out


def _gate_problems(v: dict[str, dict[str, Any]]) -> list[str]:
    bad = []
    s = v.get("smaller-cuda-graph", {})
    if not (s.get("verdict") == "win" and s.get("adopted")):
        bad.append(f"smaller-cuda-graph {s.get('verdict')}")
    for name, cls in DEAD_ENDS.items():
        if (v.get(name, {}).get("verdict"), v.get(name, {}).get("failure_class")) != ("dead_end", cls):
            bad.append(f"{name} {v.get(name, {}).get('verdict')}/{v.get(name, {}).get('failure_class')}")
    if v.get("custom-allreduce-pcie", {}).get("verdict") != "dead_end":
        bad.append("custom-allreduce-pcie " + str(v.get("custom-allreduce-pcie", {}).get("verdict")))
    n = v.get("nccl-fewer-channels", {})
    if not (n.get("verdict") == "inconclusive" and "mem-fraction-static" in (n.get("reason") or "")):
        bad.append(f"nccl-fewer-channels {n.get('verdict')}")
    if v.get("eagle3", {}).get("verdict") != "dead_end":
        bad.append("eagle3 " + str(v.get("eagle3", {}).get("verdict")))
    return bad


def _final_problems(a: dict[str, list[dict[str, Any]]]) -> tuple[list[str], str]:
    bad = []
    for name in ("flashinfer-allreduce-fusion", "torch-symm-mem"):
        last = a.get(name, [{}])[-1]
        if last.get("verdict") != "win":
            bad.append(f"{name} (CUDA 13) {last.get('verdict')}")
    eagle = a.get("eagle3", [{}])[-1]
    m = eagle.get("metrics") or {}
    one = (m.get("single_stream") or {}).get("1", {})
    single = one.get("delta_pct")
    sweep = list((m.get("parallel") or {}).values())
    # the story is the verdict's: the single stream shown faster (its winner), every level of
    # the sweep shown slower; a faster centre alone is not "wins the single stream"
    story = (
        eagle.get("verdict") == "dead_end"
        and one.get("winner") == "candidate"
        and bool(sweep)
        and all(lv.get("winner") == "baseline" for lv in sweep)
    )
    if not story:
        bad.append(f"eagle3 (CUDA 13) {eagle.get('verdict')}: {eagle.get('reason')}")
    figure = f"{single:+.1f}%" if single is not None else "-"
    return bad, figure


def one_run(index: int, base: Path, offsets: str | None = None) -> dict[str, Any]:
    cwd = base / f"run-{index}"
    cwd.mkdir(parents=True)
    t0 = time.monotonic()
    playbook = PLAYBOOK
    if offsets:  # the shipped playbook with only its launch_offsets line changed
        playbook = cwd / PLAYBOOK.name
        text, n = re.subn(r"(?m)^(\s+launch_offsets:) (?:seeded|fresh)\b", rf"\1 {offsets}", PLAYBOOK.read_text())
        assert n == 1, "the playbook's node.launch_offsets line"
        playbook.write_text(text)
    run = _cli(cwd, "run", str(playbook), "--db", "c.db", "-q")
    row: dict[str, Any] = {"run": index, "gate_exit": run.returncode, "problems": []}
    status = _cli(cwd, "status", "--db", "c.db", "--json")
    cid = json.loads(status.stdout)[0]["id"] if status.returncode == 0 and status.stdout.strip() else None
    if run.returncode != 3 or cid is None:
        row["problems"].append(f"run exited {run.returncode}: {(run.stderr or run.stdout)[-300:]}")
        row["wall_s"] = time.monotonic() - t0
        return row
    before = {k: v[-1] for k, v in _attempts(cwd, cid).items()}
    row["problems"] += _gate_problems(before)
    res = _cli(
        cwd,
        "resume",
        cid,
        "--db",
        "c.db",
        "--approve",
        "--set",
        "node.cuda=13.0",
        "--note",
        "node upgraded to CUDA 13",
        "-q",
    )
    if res.returncode != 0:
        row["problems"].append(f"resume exited {res.returncode}: {(res.stderr or res.stdout)[-300:]}")
    else:
        bad, single = _final_problems(_attempts(cwd, cid))
        row["problems"] += bad
        row["eagle3_single_cuda13"] = single
    rounds = [len(v) for v in _attempts(cwd, cid).values()]
    row["experiments"] = sum(rounds)
    row["wall_s"] = time.monotonic() - t0
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--keep", type=Path, default=None, help="keep each run's directory (database, journal) as DIR/run-N"
    )
    ap.add_argument(
        "--offsets",
        choices=["seeded", "fresh"],
        default=None,
        help="override node.launch_offsets (the playbook ships fresh: every launch draws its own offset, as on a real node; seeded: replayed from node.seed)",
    )
    args = ap.parse_args(argv)
    if args.runs < 1 or args.workers < 1:
        ap.error(f"--runs and --workers: at least 1 each (got --runs {args.runs} --workers {args.workers})")
    if args.keep is not None:
        taken = [f"run-{i}" for i in range(1, args.runs + 1) if (args.keep / f"run-{i}").exists()]
        if taken:
            ap.error(f"--keep {args.keep}: {', '.join(taken)} already there; name an empty or new directory")
        args.keep.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="demo-runs-") as tmp, ThreadPoolExecutor(args.workers) as pool:
        base = args.keep if args.keep is not None else Path(tmp)
        rows = list(pool.map(lambda i: one_run(i, base, args.offsets), range(1, args.runs + 1)))
    print("| run | wall | experiments | EAGLE-3 single stream, CUDA 13 | the seeds' story |")
    print("|---:|---:|---:|---:|---|")
    for r in rows:
        told = "yes" if not r["problems"] else "no: " + "; ".join(r["problems"])
        print(
            f"| {r['run']} | {r['wall_s'] / 60:.1f} min | {r.get('experiments', '-')} | "
            f"{r.get('eagle3_single_cuda13', '-')} | {told} |"
        )
    good = sum(1 for r in rows if not r["problems"])
    print(f"\n{good} of {len(rows)} runs told the seeds' story ({args.workers} at a time)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if good == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
