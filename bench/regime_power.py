"""How often the shipped verdict rule shows the seeds' EAGLE-3 regime ("wins the single
stream, loses the sweep at every C") within the default playbook's repeats, by the
simulated node's per-launch offset and the harness's per-level jitter.

The case is the simulated node's EAGLE-3 after the CUDA 13 resume: the noise-free model
puts the single stream at +5.2% (96.5 vs 92.0 tok/s) and the sweep at -15.7% .. -58.2%;
the seeds measured +7.4% (96.1 vs 89.5), also shown.  Each trial draws a node history of
seven two-launch baseline tables, then runs the shipped `round_decision` / `judge` round
by round with every launch's offset shared by all its levels and workloads.  It is the
e2e test's last assertion in isolation (tests/campaign/loop/test_e2e_default_playbook.py).

    python bench/regime_power.py [--trials 200]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from campaign.domain.models import LevelResult
from campaign.domain.records import LevelSamples
from campaign.playbook.load import load_playbook
from campaign.playbook.schema import VerdictSpec
from campaign.verdict.judge import judge, round_decision
from campaign.verdict.noise import estimate

SWEEP = [1, 2, 5, 10, 30, 70, 100, 250]
LOSS = {1: -15.7, 2: -24.2, 5: -37.6, 10: -46.0, 30: -54.5, 70: -57.5, 100: -57.3, 250: -58.2}
Figures = dict[tuple[str, int], float]


def launch(rng: random.Random, offset: float, jitter: float, single_pct: float | None = None) -> Figures:
    """One launch; `single_pct` None: the baseline, else EAGLE-3 with that single-stream effect."""
    o = rng.gauss(0.0, offset)
    eff = 0.0 if single_pct is None else single_pct
    out = {("single_stream", 1): 92.0 * (1 + eff / 100) * math.exp(o + rng.gauss(0.0, jitter))}
    for c in SWEEP:
        d = 0.0 if single_pct is None else LOSS[c]
        out[("parallel", c)] = 100.0 * c / (1 + c / 40) * (1 + d / 100) * math.exp(o + rng.gauss(0.0, jitter))
    return out


def _tables(launches: list[Figures]) -> dict[str, list[list[float]]]:
    return {
        "single_stream": [[math.log(f[("single_stream", 1)])] for f in launches],
        "parallel": [[math.log(f[("parallel", c)]) for c in SWEEP] for f in launches],
    }


def trial(rng: random.Random, spec: VerdictSpec, offset: float, jitter: float, single_pct: float) -> bool:
    noise = estimate(_tables([launch(rng, offset, jitter) for _ in range(2)]) for _ in range(7))
    samples = {k: LevelSamples(workload=k[0], concurrency=k[1]) for k in launch(rng, offset, jitter)}
    for r in range(1, spec.repeats.max + 1):
        c, b = launch(rng, offset, jitter, single_pct), launch(rng, offset, jitter)
        for k, ls in samples.items():
            ls.candidate.append(LevelResult(concurrency=k[1], requests=1, output_tokens_per_s=c[k]))
            ls.baseline.append(LevelResult(concurrency=k[1], requests=1, output_tokens_per_s=b[k]))
        if not round_decision(list(samples.values()), spec, r, confounded=False, noise=noise).more:
            break
    v = judge(list(samples.values()), spec, noise)
    return v.kind == "dead_end" and "single_stream" in v.reason and "parallel at every C" in v.reason


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--playbook", default=str(ROOT / "playbooks" / "eagle_verify.yaml"))
    args = ap.parse_args(argv)
    spec = load_playbook(args.playbook).verdict
    print(
        f"regime shown in {args.trials} trials per row (repeats {spec.repeats.min}-{spec.repeats.max}, "
        f"min effect {spec.min_effect_pct:g}%, confidence {spec.confidence:g})"
    )
    print("| single-stream effect | launch offset | harness jitter | regime shown |")
    print("|---:|---:|---:|---:|")
    for single in (5.2, 7.4):
        for offset, jitter in ((0.0, 0.01), (0.005, 0.01), (0.01, 0.01), (0.015, 0.01), (0.015, 0.02)):
            rng = random.Random(1)
            ok = sum(trial(rng, spec, offset, jitter, single) for _ in range(args.trials))
            print(
                f"| +{single}% | {offset * 100:.1f}% | {jitter * 100:.1f}% | {ok}/{args.trials} "
                f"({ok / args.trials:.0%}) |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
