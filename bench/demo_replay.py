"""The demo's WINs replayed in the verdict lab: how often would all of them come out WIN?

`bench/demo_runs.py` counts whole demo runs (15 minutes each); this asks the same question
of the verdict rule alone, hundreds of times in a minute.  The true effect of each WIN
at every level of the shipped playbook's workloads comes from the simulated node's
noise-free model (`tools.simnode.perfmodel.expected_output_tps`, the node's own ground
truth): the smaller CUDA graph against the CUDA 12.8 baseline, FlashInfer all-reduce fusion
and torch symmetric memory against the adopted baseline on CUDA 13.  Each replay is a
`LabNode` with the playbook's per-launch offset (1.5%) and a small per-level jitter,
running the shipped rule (`bench/verdict_lab.run_direct`: a start baseline of
`repeats.baseline` launches, then each WIN in turn) under each `repeats.max` asked for.

    python bench/demo_replay.py [--runs 300] [--repeats-max 6,12]

Prints, per `repeats.max` and for 6 fixed rounds (one look), how often each WIN came out
WIN, how often all of them did, and their mean rounds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lab_engine import Case, LabNode, Structure
from bench.verdict_lab import PLAYBOOK, run_direct
from campaign.loop.experiment import workloads_of
from campaign.playbook.load import load_playbook
from tools.simnode.config import EngineConfig
from tools.simnode.perfmodel import expected_output_tps

#: (name, flags over the baseline it is compared with, that baseline's extra flags, CUDA)
WINS = [
    ("smaller-cuda-graph", {"cuda-graph-max-bs": 128}, {}, "12.8"),
    ("flashinfer-allreduce-fusion", {"enable-flashinfer-allreduce-fusion": True}, {"cuda-graph-max-bs": 128}, "13.0"),
    ("torch-symm-mem", {"enable-torch-symm-mem": True}, {"cuda-graph-max-bs": 128}, "13.0"),
]


def true_effects(pb_path: Path = PLAYBOOK) -> dict[str, Case]:
    """Each WIN's true change (percent) at every (workload, concurrency) of the playbook."""
    pb = load_playbook(str(pb_path))
    base_flags = dict(pb.baseline.flags)
    profile = pb.node.profile  # type: ignore[union-attr]
    out = {}
    for name, flags, adopted, cuda in WINS:
        base = {**base_flags, **adopted}
        effects = {}
        for w in workloads_of(pb):
            for c in w.concurrency:
                args = (profile, cuda, c, w.prompts, w.output_tokens, 512)
                b = expected_output_tps(EngineConfig.from_flags(base), *args, requests=max(12, c))
                x = expected_output_tps(EngineConfig.from_flags({**base, **flags}), *args, requests=max(12, c))
                effects[(w.name, c)] = round(100 * (x / b - 1), 3)
        out[name] = Case("demo", effects)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--repeats-max", default="6,12", help="comma-separated repeats.max values to compare")
    args = ap.parse_args(argv)
    try:
        tops = [int(x) for x in args.repeats_max.split(",")]
    except ValueError:
        ap.error(f"--repeats-max: {args.repeats_max!r} is not a comma-separated list of round counts (e.g. 6,12)")
    if any(t < 2 for t in tops):
        ap.error(f"--repeats-max: each value must be at least repeats.min, 2 (got {args.repeats_max})")
    pb = load_playbook(str(PLAYBOOK))
    wl = workloads_of(pb)
    cases = true_effects()
    names = list(cases)
    offset = pb.node.launch_offset_pct  # type: ignore[union-attr]
    for name, case in cases.items():
        lo = min(case.effects.values())
        print(f"{name}: true effect {lo:+.1f}% .. {max(case.effects.values()):+.1f}%", end="")
        print(
            f" (lowest {lo:+.1f}%: {(lo + pb.verdict.min_effect_pct) / pb.verdict.min_effect_pct:.2f}x m above the no-loss margin)"
        )
    print(f"\n| policy | {' | '.join(names)} | all WIN | mean rounds |")
    print(f"|---|{'---:|' * len(names)}---:|---:|")
    specs = [(f"adaptive, repeats.max {top}", {"max": top}, "adaptive") for top in tops]
    specs.append(("fixed 6 rounds", {"min": 6, "max": 6}, "fixed"))
    for label, repeats, policy in specs:
        spec = pb.verdict.model_copy(
            update={"policy": policy, "repeats": pb.verdict.repeats.model_copy(update=repeats)}
        )
        wins, allwin, rounds = dict.fromkeys(names, 0), 0, 0
        for run in range(args.runs):
            node = LabNode(f"demo-replay:{run}", Structure("offset", offset, jitter_pct=0.3), list(cases.values()), wl)
            got = run_direct(node, spec, wl, len(names))
            for i, kind, r in got:
                wins[names[i]] += kind == "win"
                rounds += r
            allwin += all(kind == "win" for _, kind, _ in got)
        cells = " | ".join(f"{100 * wins[n] / args.runs:.1f}%" for n in names)
        print(f"| {label} | {cells} | {100 * allwin / args.runs:.1f}% | {rounds / args.runs / len(names):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
