"""The verdict lab's synthetic engines: true effects and noise structures, independent of
`tools/simnode`'s performance model, and an in-process `Node` that measures them.

A lab campaign is one node: a baseline throughput curve, one noise structure with its
own per-launch offset (0.5-3%), and a list of cases (hypotheses), each with a true
effect per (workload, concurrency); about one case in eight is a near-margin case (it
wins somewhere and loses 1.0-1.5x the minimum effect at C=1: only the no-loss test,
near its margin, tells that a WIN is wrong).  A launch of a config draws

    figure = truth * exp(offset + drift(t) + slow + jitter_l)

offset ~ N(0, p) per launch, shared by every level and workload; jitter_l per level and
launch, from the requests the level runs (4% / sqrt(requests) in `jitter`, 0.5%
elsewhere); slow: 1 launch in 30 is 8% slow (`heavy_tail`); drift: a linear trend of up
to 1%/hour of node time (`drift`); a candidate twice as noisy as the baseline in offset
and jitter (`noisy_candidate`); noise that moves between experiments (`moving`: each
experiment's launches, both sides, scatter exp(N(0, 0.5)) times the node's offset and
jitter, as when other jobs come and go on the machine: what the noise model's moderated
prior is for).  Every launch is drawn from an RNG seeded by the case,
the side and the round (`LabNode._key`), so the graph driver and the direct driver see
the same numbers launch by launch, and two rules see the same numbers round by round.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from campaign.domain.measurement import Measurement
from campaign.domain.models import (
    EffectiveConfig,
    Fingerprint,
    LevelResult,
    SweepResult,
    WorkloadSpec,
)
from campaign.domain.prompts import build_prompt_set
from campaign.domain.work import MEASUREMENT_PROTOCOL
from tools.loadgen.stats import requests_for_level

__all__ = [
    "NEAR_MARGIN_SHARE",
    "STRUCTURES",
    "Case",
    "LabNode",
    "Structure",
    "deciding",
    "draw_case",
    "draw_cases",
    "launch_var",
    "near_margin_case",
    "stratum",
    "truth_label",
    "verdict_is_owed",
    "verdict_is_wrong",
]

Level = tuple[str, int]
CASE_FLAG = "lab-case"
STRUCTURES = ("offset", "jitter", "heavy_tail", "drift", "noisy_candidate", "moving")
LAUNCH_NODE_S = 300.0  # node seconds one launch (start + every workload) takes


@dataclass
class Structure:
    name: str
    offset_pct: float  # sd of the per-launch offset
    jitter_pct: float = 0.5
    per_request: bool = False
    slow_every: int = 0  # 1 launch in N is `slow_pct` slow
    slow_pct: float = 8.0
    drift_pct_per_h: float = 0.0
    candidate_scale: float = 1.0
    moving_sd: float = 0.0  # log-SD of each experiment's noise factor (`moving`)

    @classmethod
    def draw(cls, name: str, rng: random.Random, offset_pct: float | None = None) -> Structure:
        p = offset_pct if offset_pct is not None else rng.uniform(0.5, 3.0)
        if name == "offset":
            return cls(name, p)
        if name == "jitter":
            return cls(name, p, per_request=True)
        if name == "heavy_tail":
            return cls(name, p, slow_every=30)
        if name == "drift":
            return cls(name, p, drift_pct_per_h=rng.uniform(-1.0, 1.0))
        if name == "noisy_candidate":
            return cls(name, p, candidate_scale=2.0)
        if name == "moving":
            return cls(name, p, moving_sd=0.5)
        raise ValueError(f"unknown noise structure {name!r} (choose from {', '.join(STRUCTURES)})")


@dataclass
class Case:
    kind: str  # null | uniform | split | growing | gray | near_margin
    effects: dict[Level, float] = field(default_factory=dict)  # true delta, percent


def draw_case(rng: random.Random, levels: list[Level], m: float) -> Case:
    """A true effect: null; uniform +-1.5..4x m; a regime split (wins low C, loses high C
    or the reverse); an effect growing with log C up to 1.5..4x m; gray 0.5..1.5x m."""
    kind = rng.choices(["null", "uniform", "split", "growing", "gray"], [0.25, 0.3, 0.15, 0.15, 0.15])[0]
    sign = rng.choice([-1.0, 1.0])
    top = max(c for _, c in levels)
    if kind == "null":
        eff = {lv: 0.0 for lv in levels}
    elif kind in ("uniform", "gray"):
        a = rng.uniform(1.5, 4.0) if kind == "uniform" else rng.uniform(0.5, 1.5)
        eff = {lv: sign * a * m for lv in levels}
    elif kind == "split":
        cut = rng.choice([2, 5, 10, 30])
        a, b = rng.uniform(1.5, 4.0), rng.uniform(1.5, 4.0)
        eff = {lv: (sign * a * m if lv[1] <= cut else -sign * b * m) for lv in levels}
    else:
        g = rng.uniform(1.5, 4.0)
        eff = {lv: sign * g * m * math.log(lv[1]) / math.log(top) for lv in levels}
    return Case(kind, {lv: round(v, 6) for lv, v in eff.items()})


#: share of a campaign's cases redrawn as near-margin cases (`near_margin_case`).
NEAR_MARGIN_SHARE = 0.12


def near_margin_case(rng: random.Random, levels: list[Level], m: float) -> Case:
    """Wins 1.5..4x m from C = 10, 30 or 70 up, loses 1.0..1.5x m at C <= 1, 2 or 5
    (C=1 always): a WIN is wrong, and only the no-loss test, near its margin, says so;
    the levels between move by nothing."""
    lose, win = rng.choice([1, 2, 5]), rng.choice([10, 30, 70])
    a, b = rng.uniform(1.5, 4.0), rng.uniform(1.0, 1.5)
    eff = {lv: (a * m if lv[1] >= win else -b * m if lv[1] <= lose else 0.0) for lv in levels}
    return Case("near_margin", {lv: round(v, 6) for lv, v in eff.items()})


def draw_cases(
    rng: random.Random, levels: list[Level], m: float, n: int, seed: str, near_share: float = NEAR_MARGIN_SHARE
) -> list[Case]:
    """`n` cases from `draw_case`, about `near_share` of them redrawn as near-margin cases
    from their own RNG (seeded by `seed` and the case), so the other cases are those an
    earlier lab drew for the same campaign, case for case (`near_share` 0: all of them,
    for replaying a case found then)."""
    out = []
    for i in range(n):
        case = draw_case(rng, levels, m)
        near = random.Random(f"{seed}:near:{i}")
        out.append(near_margin_case(near, levels, m) if near.random() < near_share else case)
    return out


def deciding(case: Case, m: float) -> tuple[float, Level] | None:
    """The test that decides the truth's verdict, as (its distance to its margin in units
    of m, its level); None where no verdict is owed (null, gray).  A true DEAD END: the
    loss test at the worst level, |loss| - m.  A true WIN: both halves must be shown, so
    the nearer of the win test at the best level (gain - m) and the no-loss test at the
    worst level (its effect + m): an effect growing from 0 at C=1 is decided by the
    no-loss test, 1x m from its margin, whatever its top."""
    if case.kind == "gray" or not verdict_is_owed(case, m):
        return None
    worst = min(case.effects, key=lambda lv: case.effects[lv])
    best = max(case.effects, key=lambda lv: case.effects[lv])
    if case.effects[worst] <= -m:
        return (-case.effects[worst] - m) / m, worst
    win, no_loss = (case.effects[best] - m) / m, (case.effects[worst] + m) / m
    return (win, best) if win <= no_loss else (no_loss, worst)


def stratum(case: Case, m: float) -> str:
    """The row a case is reported in: its kind for near-margin, null and gray cases, else
    the deciding test's distance to its margin (`deciding`)."""
    got = deciding(case, m)
    if case.kind in ("near_margin", "gray") or got is None:
        return case.kind
    d = got[0]
    return "< 0.5x m" if d < 0.5 else "0.5-1x m" if d < 1.0 else ">= 1x m"


def verdict_is_wrong(case: Case, kind: str, m: float) -> bool:
    """Scored on the generator's true effects, never on `decide()`: a WIN is
    wrong where the truth loses more than the minimum effect somewhere or gains it
    nowhere; a DEAD END ("slower") is wrong where the truth loses nowhere.  In the gray
    zone (a case drawn at 0.5..1.5x the minimum effect) any verdict is right."""
    if case.kind == "gray":
        return False
    lo, hi = min(case.effects.values()), max(case.effects.values())
    if kind == "win":
        return lo < -m or hi < m
    if kind == "dead_end":
        return lo >= 0.0
    return False


def verdict_is_owed(case: Case, m: float) -> bool:
    """A decisive verdict is owed (INCONCLUSIVE is a miss): outside the gray zone, some
    level moves by at least the minimum effect."""
    return case.kind != "gray" and max(abs(d) for d in case.effects.values()) >= m


def truth_label(case: Case, m: float) -> str:
    """What the truth is, for the rows a run writes: win, dead_end (it loses somewhere by
    the minimum effect), null or gray."""
    if case.kind == "gray":
        return "gray"
    lo, hi = min(case.effects.values()), max(case.effects.values())
    return "dead_end" if lo <= -m else "win" if hi >= m else "null"


def launch_var(s: Structure, requests: int, candidate: bool, factor: float = 1.0) -> float:
    """One launch's true variance (log scale) at a level with `requests` requests: offset
    + jitter (+ the heavy tail's mixture), a candidate's scaled, and both by the
    experiment's noise factor (`LabNode.factor`, `LabNode.draw`)."""
    scale = (s.candidate_scale if candidate else 1.0) * factor
    j = (4.0 / math.sqrt(requests) if s.per_request else s.jitter_pct) / 100
    var = ((s.offset_pct / 100) ** 2 + j * j) * scale * scale
    if s.slow_every:
        p = 1.0 / s.slow_every
        var += p * (1 - p) * math.log1p(-s.slow_pct / 100) ** 2
    return var


class LabNode:
    """An in-process `campaign.ports.Node`: each `measure` is one launch of the generator."""

    def __init__(
        self, seed: str, structure: Structure, cases: list[Case], workloads: list[WorkloadSpec], draws: str = "paired"
    ) -> None:
        self.name = "lab-node"
        self.seed, self.structure, self.cases = seed, structure, cases
        if draws not in ("paired", "sequential"):
            raise ValueError(f"draws: 'paired' or 'sequential', not {draws!r}")
        self.draws = draws
        self.launches = 0
        self.measuring: int | None = None  # the case whose rounds the node measures now
        self._count: dict[tuple[str, int | None], int] = {}
        self.truth = {
            (w.name, c): 1000.0 * c / (1.0 + c / 40.0) / (1.0 + 0.1 * i)
            for i, w in enumerate(workloads)
            for c in w.concurrency
        }
        self.requests = {
            (w.name, c): requests_for_level(w.requests_per_level, c) for w in workloads for c in w.concurrency
        }
        # the prompt sets the playbook names: the graph reads only launches of today's work
        self.prompts = {w.name: build_prompt_set(w).hash for w in workloads}

    def noise_pct(self, lv: Level, case: int | None = None) -> float:
        """The noisier side's per-launch standard deviation at a level (in that case's
        experiment), percent."""
        f = self.factor(case)
        return 100 * math.sqrt(max(launch_var(self.structure, self.requests[lv], c, f) for c in (False, True)))

    def factor(self, case: int | None) -> float:
        """How much noisier than the node's own noise a case's experiment runs (`moving`;
        1 elsewhere, and for the start baseline)."""
        if not self.structure.moving_sd or case is None:
            return 1.0
        return math.exp(random.Random(f"{self.seed}:moving:{case}").gauss(0.0, self.structure.moving_sd))

    def fingerprint(self) -> Fingerprint:
        return Fingerprint(gpu="lab", gpu_count=8, arch="lab", cuda="12.8", engine="lab")

    def draw(self, case: int | None) -> dict[Level, float]:
        """One launch: every level's figure (see the module doc)."""
        s, k = self.structure, self.launches
        self.launches += 1
        if case is not None:
            self.measuring = case
        rng = random.Random(self._key(case, k))
        # a baseline launch belongs to the experiment whose rounds the node measures now
        scale = (s.candidate_scale if case is not None else 1.0) * self.factor(self.measuring)
        shift = rng.gauss(0.0, s.offset_pct / 100 * scale)
        shift += s.drift_pct_per_h / 100 * k * LAUNCH_NODE_S / 3600
        if s.slow_every and rng.random() < 1.0 / s.slow_every:
            shift += math.log1p(-s.slow_pct / 100)
        effects = self.cases[case].effects if case is not None else {}
        out = {}
        for lv, t in self.truth.items():
            j = (4.0 / math.sqrt(self.requests[lv]) if s.per_request else s.jitter_pct) / 100 * scale
            out[lv] = t * (1 + effects.get(lv, 0.0) / 100) * math.exp(shift + rng.gauss(0.0, j))
        return out

    def _key(self, case: int | None, k: int) -> str:
        """The draw's seed.  `paired`: the case, the side and that side's launch count in
        the case, so every rule sees the same figures for the same round of the same case
        whatever rounds it measured before (two rules' verdicts compare case by case);
        `sequential`: the node's launch count (the lab's keying before 2026-12-05, kept
        so the cases found then still replay)."""
        if self.draws == "sequential":
            return f"{self.seed}:{k}"
        side = ("c" if case is not None else "b", self.measuring)
        n = self._count.get(side, 0)
        self._count[side] = n + 1
        return f"{self.seed}:{side[0]}{side[1]}:{n}"

    def measure(
        self,
        config: EffectiveConfig,
        workloads: list[WorkloadSpec],
        *,
        label: str,
        correctness_prompts: list[str] | None = None,
        correctness_tokens: int = 16,
    ) -> Measurement:
        case = config.flags.get(CASE_FLAG)
        figures = self.draw(int(case) if case is not None else None)
        sweeps = {
            w.name: SweepResult(
                workload=w,
                prompt_set_hash=self.prompts[w.name],
                protocol=MEASUREMENT_PROTOCOL,
                levels=[
                    LevelResult(
                        concurrency=c, requests=self.requests[(w.name, c)], output_tokens_per_s=figures[(w.name, c)]
                    )
                    for c in w.concurrency
                ],
            )
            for w in workloads
        }
        return Measurement(sweeps=sweeps, command=f"lab {label}", node_seconds=LAUNCH_NODE_S)
