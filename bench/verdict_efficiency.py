"""Verdict efficiency: a fixed protocol of 3 repeats per side vs the adaptive policy.

Ground truth is the simulated node's noise-free performance model
(`tools.simnode.perfmodel.expected_output_tps`) for the playbook's baseline and every
hypothesis, at every workload level.  The true verdict is `decide` on those exact
figures (a zero-width interval).  Measurements are drawn around the truth: per sample
a log-normal error of `--noise` percent, per round a common node drift of `--drift`
percent shared by baseline and candidate (what interleaving is for).  The noise floor
comes from a simulated start-of-campaign baseline of 3 repeats (the same cost for every
policy, reported apart).  Launch failures are not part of the performance model:
hypotheses that would crash on the real node measure as null effects here.

Node time: per level requests * output_tokens / measured tok/s, plus `--launch-s` per
server launch (each side of each round relaunches, as `campaign.loop.nodes` does).
Policies: fixed-3; adaptive (repeats 1..6, every workload every round, as the graph
runs now); adaptive+selective (re-runs only `workloads_needing_repeats`).
A wrong verdict is a decisive verdict (win / dead end) whose kind differs from the
truth's; a missed one is inconclusive where the truth is decisive.
Target: adaptive has zero wrong verdicts at <= half the node time of fixed-3.

    python bench/verdict_efficiency.py [--seeds 20] [--noise 1.5] [--drift 0.5] [--json FILE]

Result (playbooks/eagle_verify.yaml, min effect 2%, 8 hypotheses x CUDA 12.8/13.0 x 20
seeds, drift 0.5%; node time relative to fixed-3, wrong / missed of 320 verdicts):
    noise 1.0%: fixed-3 1.00, 0 / 2    adaptive+selective 0.42, 0 / 1
    noise 1.5%: fixed-3 1.00, 0 / 17   adaptive+selective 0.46, 0 / 6
    noise 2.0%: fixed-3 1.00, 0 / 41   adaptive+selective 0.49, 0 / 21
    noise 3.0%: fixed-3 1.00, 0 / 68   adaptive+selective 0.51, 1 / 58
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from campaign.domain.models import ConfigChange, EffectiveConfig, LevelResult
from campaign.domain.records import LevelComparison, LevelSamples
from campaign.loop.experiment import confound_changes, hypothesis_config
from campaign.playbook.load import load_playbook
from campaign.playbook.schema import Playbook, VerdictSpec
from campaign.verdict.rule import compare_levels, decide, needs_more_repeats, workloads_needing_repeats
from campaign.verdict.stats import noise_estimate
from tools.loadgen.stats import requests_for_level
from tools.simnode.config import EngineConfig
from tools.simnode.perfmodel import expected_output_tps

Level = tuple[str, int]


@dataclass
class Case:
    name: str
    truth: dict[Level, float]  # candidate tok/s per (workload, C)
    confounded_by: list[ConfigChange] = field(default_factory=list)


def _truth(pb: Playbook, config: EffectiveConfig, cuda: str) -> dict[Level, float]:
    profile = getattr(pb.node, "profile", "rtx6000bw-pcie-8x")
    flags = {"tp": 8, "model-path": pb.server.model, **config.flags}
    cfg = EngineConfig.from_flags(flags, config.env)
    return {
        (name, c): expected_output_tps(cfg, profile, cuda, concurrency=c, prompt_kind=wl.prompts,
                                       output_tokens=wl.output_tokens, prompt_tokens=wl.prompt_tokens)
        for name, wl in pb.workloads.items() for c in wl.concurrency
    }


def build_cases(pb: Playbook, cuda: str) -> tuple[dict[Level, float], list[Case]]:
    base = EffectiveConfig(flags=dict(pb.baseline.flags), env=dict(pb.baseline.env))
    cases = []
    for h in pb.hypotheses:
        if h.patch:
            continue  # patches change code the performance model does not see
        cand = hypothesis_config(base, h)
        cases.append(Case(h.name, _truth(pb, cand, cuda), confound_changes(base, cand, h)))
    return _truth(pb, base, cuda), cases


def _exact(base: dict[Level, float], cand: dict[Level, float], metric: str) -> list[LevelComparison]:
    out = []
    for (wl, c), b in base.items():
        d = (cand[(wl, c)] / b - 1) * 100
        winner = "candidate" if d >= 0 else "baseline"
        out.append(LevelComparison(workload=wl, concurrency=c, metric=metric, baseline_mean=b,
                                   candidate_mean=cand[(wl, c)], delta_pct=d, ci_low_pct=d, ci_high_pct=d,
                                   n_baseline=1, n_candidate=1, winner=winner))
    return out


def true_verdict(spec: VerdictSpec, base: dict[Level, float], case: Case) -> str:
    from campaign.verdict.rule import level_winner

    levels = [c.model_copy(update={"winner": level_winner(c.delta_pct, c.delta_pct, c.delta_pct, spec.min_effect_pct)})
              for c in _exact(base, case.truth, spec.metric)]
    return decide(levels, spec, confounded_by=case.confounded_by).kind


@dataclass
class Sim:
    pb: Playbook
    noise: float
    drift: float
    launch_s: float

    def draw(self, rng: random.Random, truth: float, round_factor: float) -> float:
        return truth * round_factor * math.exp(rng.gauss(0.0, math.log1p(self.noise / 100)))

    def seconds(self, wl: str, c: int, tps: float) -> float:
        w = self.pb.workloads[wl]
        return requests_for_level(w.requests_per_level, c) * w.output_tokens / tps

    def noise_floor(self, rng: random.Random, base: dict[Level, float]) -> tuple[float, int, float]:
        reps = {lv: [self.draw(rng, t, 1.0) for _ in range(3)] for lv, t in base.items()}
        est = noise_estimate(reps)
        assert est is not None
        cost = sum(self.seconds(wl, c, x) for (wl, c), xs in reps.items() for x in xs) + 3 * self.launch_s
        return est.pct, est.df, cost

    def run(self, rng: random.Random, spec: VerdictSpec, base: dict[Level, float], case: Case,
            floor: tuple[float, int], selective: bool) -> tuple[str, float, int]:
        samples = {lv: LevelSamples(workload=lv[0], concurrency=lv[1]) for lv in base}
        todo, rounds, seconds = list(self.pb.workloads), 0, 0.0
        while True:
            f = math.exp(rng.gauss(0.0, math.log1p(self.drift / 100)))
            for lv, s in samples.items():
                if lv[0] not in todo:
                    continue
                b, x = self.draw(rng, base[lv], f), self.draw(rng, case.truth[lv], f)
                s.baseline.append(LevelResult(concurrency=lv[1], requests=1, output_tokens_per_s=b))
                s.candidate.append(LevelResult(concurrency=lv[1], requests=1, output_tokens_per_s=x))
                seconds += self.seconds(*lv, b) + self.seconds(*lv, x)
            seconds += 2 * self.launch_s
            rounds += 1
            cmp = compare_levels(list(samples.values()), spec, noise_floor_pct=floor[0], noise_floor_df=floor[1])
            if not needs_more_repeats(cmp, spec, rounds):
                break
            if selective and rounds >= spec.repeats.min:
                todo = workloads_needing_repeats(cmp, spec) or list(self.pb.workloads)
        return decide(cmp, spec, confounded_by=case.confounded_by).kind, seconds, rounds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--playbook", default=str(ROOT / "playbooks" / "eagle_verify.yaml"))
    ap.add_argument("--cuda", action="append", help="CUDA stacks to run the cases on (default 12.8 and 13.0)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--noise", type=float, default=1.5, help="per-sample noise, percent")
    ap.add_argument("--drift", type=float, default=0.5, help="per-round node drift shared by both sides, percent")
    ap.add_argument("--launch-s", type=float, default=60.0, help="node seconds per server launch")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)

    pb = load_playbook(args.playbook)
    m = pb.verdict.min_effect_pct
    policies = {
        "fixed-3": (VerdictSpec(min_effect_pct=m, policy="fixed", repeats={"min": 3, "max": 3}), False),
        "adaptive": (VerdictSpec(min_effect_pct=m, policy="adaptive", repeats={"min": 1, "max": 6}), False),
        "adaptive+selective": (VerdictSpec(min_effect_pct=m, policy="adaptive", repeats={"min": 1, "max": 6}), True),
    }
    sim = Sim(pb, args.noise, args.drift, args.launch_s)
    totals = {p: {"node_s": 0.0, "wrong": 0, "missed": 0, "rounds": 0, "runs": 0} for p in policies}
    per_case: dict[str, dict[str, object]] = {}
    floor_cost = 0.0
    for cuda in args.cuda or ["12.8", "13.0"]:
        base, cases = build_cases(pb, cuda)
        for case in cases:
            key = f"{case.name}@cuda{cuda}"
            truth = true_verdict(policies["fixed-3"][0], base, case)
            row: dict[str, object] = {"truth": truth}
            for p, (spec, selective) in policies.items():
                kinds: dict[str, int] = {}
                for seed in range(args.seeds):
                    rng = random.Random(f"{key}:{seed}")
                    pct, df, cost = sim.noise_floor(rng, base)
                    floor_cost += cost if p == "fixed-3" else 0.0
                    kind, seconds, rounds = sim.run(rng, spec, base, case, (pct, df), selective)
                    kinds[kind] = kinds.get(kind, 0) + 1
                    t = totals[p]
                    t["node_s"] += seconds
                    t["rounds"] += rounds
                    t["runs"] += 1
                    t["wrong"] += int(kind != truth and kind != "inconclusive")
                    t["missed"] += int(kind == "inconclusive" and truth != "inconclusive")
                row[p] = kinds
            per_case[key] = row

    fixed_s = totals["fixed-3"]["node_s"]
    print(f"{len(per_case)} cases x {args.seeds} seeds, noise {args.noise}%, drift {args.drift}%, "
          f"min effect {m}%, launch {args.launch_s:g} s")
    print(f"{'case':38} {'truth':13} " + " ".join(f"{p:>24}" for p in policies))
    for key, row in per_case.items():
        cells = [" ".join(f"{k[:3]}:{v}" for k, v in sorted(row[p].items())) for p in policies]  # type: ignore[union-attr]
        print(f"{key:38} {row['truth']:13} " + " ".join(f"{c:>24}" for c in cells))
    print(f"\n{'policy':20} {'node h':>8} {'vs fixed':>9} {'rounds/run':>11} {'wrong':>6} {'missed':>7}")
    for p, t in totals.items():
        print(f"{p:20} {t['node_s'] / 3600:8.2f} {t['node_s'] / fixed_s:9.2f} {t['rounds'] / t['runs']:11.2f} "
              f"{t['wrong']:6d} {t['missed']:7d}")
    print(f"(start-of-campaign baselines for the noise floor, same for every policy: {floor_cost / 3600:.2f} node h)")
    ok = totals["adaptive"]["wrong"] == 0 and totals["adaptive"]["node_s"] <= 0.5 * fixed_s
    print(f"target (adaptive: zero wrong verdicts at <= half the node time of fixed-3): {'met' if ok else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "totals": totals, "cases": per_case}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
