"""Wall time of one campaign of independent hypotheses on one node and on N nodes.

    python bench/parallel_nodes.py [--nodes 2] [--hypotheses 4] [--time-scale 20] [--out DIR]

Both runs use the same playbook (simulated nodes on this machine, interleaved
baselines) except for the node section, so the ratio is the speed-up of the fan-out:
with N nodes the hypotheses run N at a time.  Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from campaign.cli.runner import start_campaign
from campaign.store import Store

#: independent flag hypotheses (none adopted, no patch, no dependency): one batch per N.
FLAGS = [
    {"chunked-prefill-size": 1024},
    {"cuda-graph-max-bs": 256},
    {"disable-cuda-graph": True},
    {"mem-fraction-static": 0.85},
    {"cuda-graph-max-bs": 384},
    {"chunked-prefill-size": 2048},
    {"cuda-graph-max-bs": 128},
    {"chunked-prefill-size": 4096},
]


def playbook(dirpath: Path, *, nodes: int, hypotheses: int, time_scale: float) -> Path:
    sim = {
        "kind": "simulated",
        "profile": "rtx6000bw-pcie-8x",
        "cuda": "12.8",
        "time_scale": time_scale,
        "noise_pct": 1.0,
    }
    data = {
        "name": f"bench-{nodes}-nodes",
        "journal": str(dirpath / "journal.md"),
        "database": str(dirpath / "campaign.db"),
        "nodes": [{**sim, "name": f"sim-{i}", "seed": i} for i in range(nodes)] if nodes > 1 else [],
        "node": {**sim, "name": "sim-0", "seed": 0},
        "server": {
            "engine": "simulated",
            "model": "sim-model",
            "startup_timeout_s": 120,
            "command": "{python} -m tools.simnode --host {host} --port {port} --profile {profile} "
            "--cuda {cuda} --seed {seed} --time-scale {time_scale} --noise-pct {noise_pct} "
            "--model-path {model} --tp 8 {flags}",
        },
        "baseline": {"flags": {"cuda-graph-max-bs": 512, "mem-fraction-static": 0.88}},
        "workloads": {
            "single_stream": {
                "concurrency": [1],
                "prompts": "fixed",
                "output_tokens": 128,
                "requests_per_level": 3,
                "warmup_requests": 0,
            },
            "parallel": {
                "concurrency": [8],
                "prompts": "diverse",
                "output_tokens": 128,
                "requests_per_level": "C",
                "warmup_requests": 0,
            },
        },
        "verdict": {
            "min_effect_pct": 3,
            "repeats": {"min": 2, "max": 2},
            "policy": "fixed",
            "correctness": {"prompts": 3, "max_tokens": 8},
        },
        "review": {"after_no_win_streak": 100},
        "hypotheses": [{"name": f"h{i}", "flags": FLAGS[i % len(FLAGS)]} for i in range(hypotheses)],
    }
    path = dirpath / "playbook.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_once(dirpath: Path, *, nodes: int, hypotheses: int, time_scale: float) -> tuple[float, str]:
    dirpath.mkdir(parents=True, exist_ok=True)
    path = playbook(dirpath, nodes=nodes, hypotheses=hypotheses, time_scale=time_scale)
    t0 = time.monotonic()
    out = start_campaign(str(path), db=str(dirpath / "campaign.db"), new=True)
    wall = time.monotonic() - t0
    if out.status != "finished":
        raise SystemExit(f"{nodes} node(s): campaign {out.status}: {out.reason}")
    data = Store(dirpath / "campaign.db").show_json(out.campaign_id)
    verdicts = ", ".join(
        f"{e['hypothesis']}@{e['node']}={e['verdict']}" for e in data["experiments"] if e["hypothesis"] != "baseline"
    )
    return wall, verdicts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--hypotheses", type=int, default=4)
    p.add_argument("--time-scale", type=float, default=20.0)
    p.add_argument("--out", default=None, help="keep the campaigns here (default: a temp dir)")
    ns = p.parse_args(argv)
    base = Path(ns.out) if ns.out else Path(tempfile.mkdtemp(prefix="bench-parallel-"))
    rows = []
    for n in (1, ns.nodes):
        wall, verdicts = run_once(base / f"{n}-nodes", nodes=n, hypotheses=ns.hypotheses, time_scale=ns.time_scale)
        rows.append((n, wall, verdicts))
        print(f"{n} node(s): {wall:.1f} s  ({verdicts})", file=sys.stderr)
    one = rows[0][1]
    print(
        f"\n{ns.hypotheses} independent hypotheses, simulated nodes at time scale {ns.time_scale:g}, "
        f"2 interleaved rounds each (baseline at start on the first node):\n"
    )
    print("| nodes | wall time | vs one node |")
    print("|---:|---:|---:|")
    for n, wall, _ in rows:
        print(f"| {n} | {wall:.1f} s | {wall / one:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
