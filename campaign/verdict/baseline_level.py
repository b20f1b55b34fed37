"""Where the baseline config's launches usually sit: a stall that hits every baseline
launch of an experiment.

The stall screen (`campaign.verdict.screen`) judges a launch against the other launches
of its own side.  When every baseline launch of an experiment is slowed (1 launch in 30
stalls by 8% in the verdict lab's `heavy_tail`: both launches of a two-round experiment
in one of 900, two of three in one of 300), nothing inside the experiment shows it: the
candidate looks faster by the stall.  The lab had two such cases at a per-launch noise
of 1.1-1.3%: a null candidate and a regime split called WINs after 2 and 3 rounds.

The baseline config has been launched many times on this node: its latest `RECENT`
experiments' baseline launches (screened) say where its launch mean sits
(`recent_level`).  A baseline side whose launches' mean lies below that level by more
than the one-sided t(1 - `LOW_P` / workloads) of its spread (one launch mean's variance
from the node's noise model, over this side's launches and over the reference's) is
suspect (`low_workloads`, on the drift check's `drift.mean_shift`): a stall, or the node itself moved.  Either way the stopping
rule measures on, up to repeats.max (`campaign.verdict.judge`): more launches tell
which, and the screen drops a stalled launch once it has company.  Nothing is dropped on
this evidence alone: if the node moved, the interleaved comparison is right and the
extra rounds cost node time, not a verdict.  Only below: a baseline launch far above its
level is not interference.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from scipy import stats as _scipy_stats

from campaign.verdict.components import Table
from campaign.verdict.drift import mean_shift
from campaign.verdict.noise import LaunchLevel, NodeNoise, prior_scale
from campaign.verdict.screen import screen

__all__ = ["LOW_P", "RECENT", "low_workloads", "recent_level"]

#: experiments (groups of baseline launches) the baseline's level is read from: recent
#: enough that a slow drift of the node moves it along.
RECENT = 5
#: a baseline side lies below its level at this one-sided p-value (over the workloads).
LOW_P = 0.001


def recent_level(groups: Sequence[Mapping[str, Table]], noise: NodeNoise) -> dict[str, LaunchLevel]:
    """Per workload, the level of the baseline config's launches in `groups` (the
    caller's latest `RECENT` experiments' baseline tables of that config), each table
    screened on the node's scale first."""
    means: dict[str, list[float]] = {}
    for group in groups:
        for name, table in group.items():
            w = noise.get(name)
            if w is None or not table or len(table[0]) != w.levels:
                continue
            sc = screen(table, prior_scale(w))
            means.setdefault(name, []).extend(math.fsum(row) / len(row) for row in sc.table)
    return {name: LaunchLevel(mean=math.fsum(ms) / len(ms), launches=len(ms)) for name, ms in means.items() if ms}


def low_workloads(sides: Mapping[str, Table], level: Mapping[str, LaunchLevel], noise: NodeNoise) -> list[str]:
    """The workloads whose baseline launches (screened, log) lie below the level far
    beyond one launch's noise (module doc)."""
    tests = []
    for name, table in sides.items():
        w, ref = noise.get(name), level.get(name)
        if w is None or ref is None or not table or len(table[0]) != w.levels or ref.launches < 2:
            continue
        shift, se = mean_shift(table, ref.mean, ref.launches, w)
        if se <= 0:
            continue
        tests.append((name, float(_scipy_stats.t.cdf(shift / se, w.rows.df))))
    return [name for name, p in tests if p < LOW_P / max(1, len(tests))]
