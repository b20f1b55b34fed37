"""Build a synthetic N-experiment campaign through the Store API, as the loop writes it.

Per experiment: 2 workloads x 8 levels x 2 sides x 3 rounds (`record_side`, one
transaction per side and round), the per-side artifacts the loop records (command,
node seconds, server stats, reported config, greedy outputs on round 0), then a
verdict with 16 level comparisons and `finish_experiment`.  Verdicts mix wins,
inconclusives, slower dead ends and launch crashes (no runs, a failure and its log);
every 50th experiment is an adopted win followed by a re-measured baseline.
Deterministic for a given seed.  Used by `bench/scale.py`.
"""

from __future__ import annotations

import json
import random
from functools import partial
from pathlib import Path

from campaign.domain.models import (
    EffectiveConfig,
    Failure,
    FailureClass,
    Fingerprint,
    LevelResult,
    Stat,
)
from campaign.domain.records import CorrectnessResult, LevelComparison, Verdict
from campaign.loop.work_check import expected_keys
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.ports.records import LaunchTime, RunSide
from campaign.store import Store

WORKLOADS = {"single_stream": [1, 2, 4, 8, 16, 32, 64, 128], "parallel": [1, 2, 5, 10, 30, 70, 100, 250]}
PLAYBOOK = {
    "name": "scale-bench",
    "description": "A synthetic week-long campaign built through the store API (bench/scale.py).",
    "verdict": {"metric": "output_tokens_per_s"},
    "workloads": {w: {"concurrency": cs} for w, cs in WORKLOADS.items()},
}
FAMILIES = ["nccl", "cuda-graph", "attention", "spec-decode", "kv-cache", "scheduler", "quant", "allreduce"]
WORDS = [
    "the",
    "model",
    "answers",
    "with",
    "a",
    "short",
    "list",
    "of",
    "facts",
    "about",
    "the",
    "question",
    "and",
    "then",
    "explains",
    "each",
    "of",
    "them",
    "in",
    "turn",
    "so",
    "that",
    "a",
    "reader",
    "can",
    "follow",
    "the",
    "reasoning",
    "step",
    "by",
    "step",
]
FP = Fingerprint(
    gpu="NVIDIA H200",
    gpu_count=8,
    arch="sm_90",
    driver="575.51",
    cuda="12.8",
    engine="sglang",
    engine_version="0.4.9",
    engine_sha="1a2b3c4",
    interconnect="nvlink",
)
BASE_FLAGS = {"tp": 8, "cuda-graph-max-bs": 512, "mem-fraction-static": 0.88}
WORK = expected_keys(Playbook.model_validate(PLAYBOOK))  # the work the loop's noise model reads (bench/scale.py)


def _stat(rng: random.Random, scale: float) -> Stat:
    p50 = scale * rng.uniform(0.9, 1.1)
    return Stat(
        mean=p50 * rng.uniform(1.0, 1.1), p50=p50, p90=p50 * rng.uniform(1.2, 1.6), p99=p50 * rng.uniform(1.6, 3.0)
    )


def _level(rng: random.Random, c: int, tps: float) -> LevelResult:
    requests = 2 * c
    out_tokens = requests * 256
    return LevelResult(
        concurrency=c, requests=requests, output_tokens=out_tokens, input_tokens=requests * 512,
        duration_s=out_tokens / tps, output_tokens_per_s=tps, requests_per_s=tps / 256,
        ttft_ms=_stat(rng, 40 + c), itl_ms=_stat(rng, 12 + c / 10), tpot_ms=_stat(rng, 12 + c / 9),
        e2e_ms=_stat(rng, 3200 + 10 * c),
    )  # fmt: skip


def _truth(w: str, c: int) -> float:
    return (82.0 if w == "single_stream" else 92.0) * c**0.8


def _side(store: Store, rng: random.Random, exp_id: str, side: RunSide, rnd: int, effect: float) -> None:
    launch = partial(store.record_launch_artifact, exp_id, side=side, repeat=rnd)
    launch(
        "command",
        "python -m sglang.launch_server --model-path /models/llama-70b --tp 8 "
        "--cuda-graph-max-bs 512 --mem-fraction-static 0.88 --port 30000 --host 127.0.0.1",
    )
    launch(
        "server_stats",
        json.dumps(
            {
                "kv_capacity_tokens": 812345,
                "max_running_requests": 256,
                "spec_accept_length": round(rng.uniform(2, 4), 3),
            }
        ),
    )
    launch("reported_config", json.dumps({"flags": BASE_FLAGS, "env": {}}))
    if rnd == 0:
        outputs = [" ".join(rng.choice(WORDS) for _ in range(120)) for _ in range(8)]
        launch("outputs", json.dumps(outputs))
    store.record_launch_time(exp_id, LaunchTime(side=side, repeat=rnd, node_seconds=rng.uniform(60, 120)))
    levels = [
        (w, _level(rng, c, _truth(w, c) * effect * rng.gauss(1, 0.01)), WORK[w])
        for w, cs in WORKLOADS.items()
        for c in cs
    ]
    store.record_side(exp_id, side, rnd, levels, node="gpu-node-1")


def _comparisons(effect: float, rng: random.Random) -> list[LevelComparison]:
    out = []
    for w, cs in WORKLOADS.items():
        for c in cs:
            base = _truth(w, c)
            delta = (effect - 1) * 100 + rng.gauss(0, 0.3)
            winner = "tie" if abs(delta) < 1.0 else ("candidate" if delta > 0 else "baseline")
            out.append(
                LevelComparison(
                    workload=w,
                    concurrency=c,
                    baseline_mean=base,
                    candidate_mean=base * (1 + delta / 100),
                    delta_pct=delta,
                    ci_low_pct=delta - 1.0,
                    ci_high_pct=delta + 1.0,
                    loss_bound_pct=delta - 0.8,
                    df=4.0,
                    level_confidence=0.997,
                    n_baseline=3,
                    n_candidate=3,
                    winner=winner,
                )
            )  # type: ignore[arg-type]
    return out


def add_baseline(store: Store, cid: str, rng: random.Random, n: int, fp: str, config: EffectiveConfig) -> str:
    b = store.start_experiment(
        cid,
        "baseline",
        role="baseline",
        config=config,
        node="gpu-node-1",
        fingerprint_id=fp,
        reason="start" if n == 0 else f"adopted after experiment {n}",
    )
    for rnd in range(3):
        _side(store, rng, b.id, "baseline", rnd, 1.0)
    store.finish_experiment(b.id, node_seconds=300.0)
    store.update_campaign(cid, baseline_experiment_id=b.id)
    return b.id


def add_experiment(store: Store, cid: str, rng: random.Random, n: int, fp: str, baseline_id: str) -> tuple[str, bool]:
    """Experiment number `n` (1-based); returns its id and whether it was an adopted win."""
    family = FAMILIES[n % len(FAMILIES)]
    name = f"{family}-{n}"
    spec = HypothesisSpec(
        name=name,
        rationale=f"Idea {n} of the {family} family: it may shorten the decode step.",
        flags={f"{family}-knob": n % 7},
        revisit_on=["cuda"] if n % 3 == 0 else [],
        adopt_if_win=n % 50 == 0,
    )
    store.upsert_hypothesis(cid, spec)
    config = EffectiveConfig(flags={**BASE_FLAGS, f"{family}-knob": n % 7})
    exp = store.start_experiment(
        cid,
        name,
        config=config,
        node="gpu-node-1",
        fingerprint_id=fp,
        baseline_ref=baseline_id,
        command=f"python -m sglang.launch_server --tp 8 --{family}-knob {n % 7}",
    )
    kind = "win" if n % 50 == 0 else ["win", "inconclusive", "dead_end", "crash", "inconclusive"][n % 5]
    if kind == "crash":
        failure = Failure(
            failure_class=FailureClass.oom,
            summary="CUDA out of memory while capturing CUDA graphs",
            evidence=["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"],
            exit_code=1,
            phase="start",
        )
        launch = partial(store.record_launch_artifact, exp.id, side="candidate", repeat=0)
        launch("failure", failure.model_dump_json())
        launch("log_excerpt", "\n".join(f"[2026-01-0{n % 9 + 1}] capture line {i}" for i in range(40)))
        store.record_verdict(
            exp.id,
            Verdict(
                kind="dead_end", reason=failure.summary, failure_class=FailureClass.oom, revisit_on=spec.revisit_on
            ),
        )  # before it is final, as the loop does
        store.finish_experiment(exp.id, status="failed", failure=failure, node_seconds=95.0)
    else:
        effect = {"win": 1.04, "inconclusive": 1.003, "dead_end": 0.95}[kind]
        for rnd in range(3):
            _side(store, rng, exp.id, "candidate", rnd, effect)
            _side(store, rng, exp.id, "baseline", rnd, 1.0)
        levels = _comparisons(effect, rng)
        verdict = Verdict(
            kind=kind,
            reason={
                "win": "candidate wins single_stream at every C",  # type: ignore[arg-type]
                "inconclusive": "no level differs beyond the noise floor; futile to repeat",
                "dead_end": "baseline wins every level",
            }[kind],
            levels=levels,
            regimes={w: "candidate" if kind == "win" else "tie" for w in WORKLOADS},
            revisit_on=spec.revisit_on if kind == "dead_end" else [],
            correctness=CorrectnessResult(prompts=8, mismatches=0, tolerance=0.0, passed=True),
            headline_delta_pct=levels[0].delta_pct,
            notes=["3 rounds interleaved C B C B C B"],
        )
        store.record_verdict(exp.id, verdict)
        store.finish_experiment(exp.id, node_seconds=600.0)
    store.set_hypothesis_status(cid, name, "done")
    adopted = kind == "win" and spec.adopt_if_win
    if adopted:
        store.set_adopted(exp.id)
    return exp.id, adopted


def build(db: Path | str, n: int, *, seed: int = 0) -> str:
    """A campaign of `n` experiments in a new database at `db` (a file or a URL); returns its id."""
    rng = random.Random(seed)
    with Store(db) as store:
        cid = store.create_campaign("scale-bench", playbook=PLAYBOOK, node="gpu-node-1", campaign_id=f"scale-{n}").id
        fp = store.record_fingerprint(cid, FP)
        config = EffectiveConfig(flags=dict(BASE_FLAGS))
        baseline = add_baseline(store, cid, rng, 0, fp, config)
        for i in range(1, n + 1):
            exp_id, adopted = add_experiment(store, cid, rng, i, fp, baseline)
            if adopted:
                baseline = add_baseline(store, cid, rng, i, fp, store.get_experiment(exp_id).config)
        store.update_campaign(cid, status="running")
    return cid
