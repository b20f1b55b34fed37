"""Every baseline launch of an experiment stalled (`campaign.verdict.baseline_level`): the
candidate looks faster by the stall, and nothing inside the experiment shows it.  The
node's recent launches of the baseline config do."""

from __future__ import annotations

import math
import random

from campaign.domain.models import LevelResult
from campaign.domain.records import LevelSamples
from campaign.verdict.baseline_level import RECENT, low_workloads, recent_level
from campaign.verdict.judge import judge, round_decision
from campaign.verdict.noise import NodeNoise, estimate
from tests.campaign.verdict.test_launches import SPEC, _launch, _tables

STALL = math.log1p(-0.08)  # the verdict lab's heavy_tail: a stalled launch is 8% slow


def _node(rng: random.Random, groups: int = 12) -> tuple[NodeNoise, list[dict]]:
    history = [_tables([_launch(rng) for _ in range(2)]) for _ in range(groups)]
    noise = estimate(history)
    noise.level = recent_level(history[-RECENT:], noise)
    return noise, history


def _stalled(launch: dict) -> dict:
    return {k: v * math.exp(STALL) for k, v in launch.items()}


def _experiment(rng: random.Random, rounds: int, stalled: set[int]) -> list[LevelSamples]:
    """A null candidate against a baseline whose launches in `stalled` rounds stalled."""
    s = {k: LevelSamples(workload=k[0], concurrency=k[1]) for k in _launch(random.Random(0))}
    for r in range(rounds):
        c, b = _launch(rng), _launch(rng)
        if r in stalled:
            b = _stalled(b)
        for k, ls in s.items():
            ls.candidate.append(LevelResult(concurrency=k[1], requests=1, output_tokens_per_s=c[k]))
            ls.baseline.append(LevelResult(concurrency=k[1], requests=1, output_tokens_per_s=b[k]))
    return list(s.values())


def _baseline_logs(samples: list[LevelSamples]) -> dict[str, list[list[float]]]:
    out: dict[str, list[list[float]]] = {}
    for w in ("single_stream", "parallel"):
        ss = sorted((s for s in samples if s.workload == w), key=lambda s: s.concurrency)
        out[w] = [[math.log(s.baseline[i].output_tokens_per_s) for s in ss] for i in range(len(ss[0].baseline))]
    return out


def test_two_stalled_baseline_launches_make_a_null_candidate_look_like_a_win_and_the_rule_measures_on() -> None:
    """Without the level the rule stops at once with a WIN (the lab's heavy_tail 47:12);
    with it, it measures a third round and says why."""
    rng = random.Random(11)
    noise, _ = _node(rng)
    samples = _experiment(rng, 2, {0, 1})
    blind = noise.model_copy(update={"level": {}})
    assert judge(samples, SPEC, blind).kind == "win"
    assert not round_decision(samples, SPEC, 2, confounded=False, noise=blind).more
    d = round_decision(samples, SPEC, 2, confounded=False, noise=noise)
    assert d.more and "sit below its recent level" in d.why and "single_stream" in d.why and "parallel" in d.why


def test_run_as_the_rule_runs_the_stalls_are_outweighed_and_the_win_goes() -> None:
    """Rounds as the stopping rule asks for them: the two stalled launches are diluted by
    ordinary ones (two low launches among few are not dropped by the screen: each hides
    the other in its leave-one-out spread) and the null candidate is no longer a WIN."""
    for seed in (11, 12, 13):
        noise, _ = _node(random.Random(seed))
        rounds = 2
        while round_decision(
            _experiment(random.Random(seed * 100), rounds, {0, 1}), SPEC, rounds, confounded=False, noise=noise
        ).more:
            rounds += 1
        v = judge(_experiment(random.Random(seed * 100), rounds, {0, 1}), SPEC, noise)
        assert rounds > 2 and v.kind == "inconclusive", (seed, rounds, v.reason)


def test_ordinary_baseline_launches_are_not_suspect() -> None:
    """Pure launch noise: the test's one-sided 0.001 over two workloads; over 300 null
    experiments of 2 rounds, at most 2 are flagged."""
    flagged = 0
    for seed in range(300):
        rng = random.Random(1000 + seed)
        noise, _ = _node(rng, groups=6)
        flagged += bool(low_workloads(_baseline_logs(_experiment(rng, 2, set())), noise.level, noise))
    assert flagged <= 2


def test_a_stall_above_the_level_is_not_interference_and_the_level_tracks_the_latest_launches() -> None:
    rng = random.Random(3)
    noise, history = _node(rng, groups=30)
    fast = {w: [[x - STALL for x in row] for row in t] for w, t in _baseline_logs(_experiment(rng, 2, set())).items()}
    assert low_workloads(fast, noise.level, noise) == []
    # the node moved down 8% five experiments ago: its recent level follows, no alarm
    moved = [{w: [[x + STALL for x in row] for row in t] for w, t in g.items()} for g in history[-5:]]
    noise.level = recent_level((history[:-5] + moved)[-RECENT:], noise)
    slow_now = {
        w: [[x + STALL for x in row] for row in t] for w, t in _baseline_logs(_experiment(rng, 2, set())).items()
    }
    assert low_workloads(slow_now, noise.level, noise) == []
    noise.level = recent_level(history[-RECENT:], noise)
    assert set(low_workloads(slow_now, noise.level, noise)) == {"single_stream", "parallel"}


def test_the_graph_reads_the_level_of_the_compared_baseline_only(tmp_path) -> None:
    """`node_noise(..., baseline=)` on a real SQLite store: the level comes from the
    latest experiments compared with that baseline (and its own launches), not from those
    of an adopted one measured 10% faster, and not at all without a baseline."""
    from campaign.domain.models import EffectiveConfig
    from campaign.loop.experiment import node_noise
    from tests.campaign.verdict.test_drift import _campaign
    from tests.campaign.verdict.test_drift import _launch as _store_launch

    rng = random.Random(5)
    store, cid, base = _campaign(tmp_path, rng)
    ref = node_noise(store, cid, "n", None, "output_tokens_per_s", baseline=base).level["w"]
    assert ref.launches == 10  # the latest 5 of the 7 groups of 2 launches
    adopted = store.start_experiment(
        cid, "adopted", config=EffectiveConfig(flags={"a": 2}), role="baseline", attempt=1, node="n"
    ).id
    for r in range(2):
        _store_launch(store, adopted, "baseline", r, rng, shift=math.log(1.10))
    for i in range(3):
        e = store.start_experiment(
            cid, f"after{i}", config=EffectiveConfig(), attempt=1, baseline_ref=adopted, node="n"
        ).id
        for r in range(2):
            _store_launch(store, e, "baseline", r, rng, shift=math.log(1.10))
    old = node_noise(store, cid, "n", None, "output_tokens_per_s", baseline=base).level["w"]
    new = node_noise(store, cid, "n", None, "output_tokens_per_s", baseline=adopted).level["w"]
    assert old == ref and new.launches == 8
    assert 0.08 < new.mean - ref.mean < 0.11
    assert node_noise(store, cid, "n", None, "output_tokens_per_s").level == {}


def test_the_rounds_line_groups_the_causes_of_the_extra_rounds() -> None:
    from campaign.verdict.judge import rounds_story

    assert rounds_story("decisive after 2 rounds", {}) == "decisive after 2 rounds"
    assert rounds_story("decisive after 5 rounds", {3: "a", 4: "a", 5: "b"}) == (
        "decisive after 5 rounds; measured on for rounds 3-4: a; round 5: b"
    )
    assert rounds_story("s", {5: "a", 3: "a"}) == "s; measured on for round 3: a; round 5: a"  # not consecutive
