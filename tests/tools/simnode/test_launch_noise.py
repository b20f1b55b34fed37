"""Every launch of the simulated node draws its own speed offset, shared by every level it
serves: a fixed --seed repeats the per-step noise, never the offset."""

from __future__ import annotations

import math
import random
import statistics

import httpx

from campaign.playbook.nodes import SimulatedNodeSpec
from tools.simnode.config import EngineConfig
from tools.simnode.launchnoise import DEFAULT_LAUNCH_OFFSET_PCT, launch_step_factor
from tools.simnode.server import NodeOptions, SimNode


def test_the_offset_is_log_normal_with_the_configured_spread():
    rng = random.Random(3)
    logs = [math.log(launch_step_factor(1.5, rng)) for _ in range(4000)]
    assert abs(statistics.fmean(logs)) < 0.001
    assert 0.0140 < statistics.stdev(logs) < 0.0160
    assert launch_step_factor(0.0, rng) == 1.0


def test_one_draw_per_launch_shared_by_every_step_and_fresh_per_launch():
    cfg = EngineConfig.from_flags({"cuda-graph-max-bs": 128})
    pinned = [SimNode(NodeOptions(seed=7, launch_seed=s, launch_offset_pct=1.5), cfg) for s in (1, 1, 2)]
    assert pinned[0].step_time_factor == pinned[1].step_time_factor != pinned[2].step_time_factor
    assert pinned[0].engine.offset == pinned[0].step_time_factor  # every step of the launch carries it
    fresh = {SimNode(NodeOptions(seed=7), cfg).step_time_factor for _ in range(5)}
    assert len(fresh) == 5  # same --seed, five launches, five offsets
    assert SimNode(NodeOptions(seed=7, launch_offset_pct=0.0), cfg).step_time_factor == 1.0


def test_the_node_spec_and_the_server_default_agree():
    assert SimulatedNodeSpec().launch_offset_pct == DEFAULT_LAUNCH_OFFSET_PCT


def test_server_info_reports_the_offset(launch):
    a = launch("--launch-offset-pct", "2.0", "--launch-seed", "5")
    b = launch("--launch-offset-pct", "0")
    assert a.wait_healthy() and b.wait_healthy()
    ia, ib = httpx.get(a.url + "/server_info").json(), httpx.get(b.url + "/server_info").json()
    assert ia["launch_offset_pct"] == 2.0 and ia["launch_speed"] != 1.0
    assert ib["launch_offset_pct"] == 0.0 and ib["launch_speed"] == 1.0


def test_seeded_launch_offsets_replay_per_launch_name_and_fresh_ones_do_not():
    from tools.node_runtime import launch_seed

    names = ["baseline0-r0", "baseline0-r1", "smaller-cuda-graph-candidate-r0", "smaller-cuda-graph-baseline-r0"]
    seeds = [launch_seed(7, n) for n in names]
    assert seeds == [launch_seed(7, n) for n in names]  # a second run of the campaign replays them
    assert len(set(seeds)) == len(names) and all(s >= 0 for s in seeds)  # every launch its own offset
    assert launch_seed(8, names[0]) != seeds[0]
    assert launch_seed(None, names[0]) == -1  # fresh


def test_a_negative_launch_seed_on_the_command_line_is_a_fresh_draw(launch):
    speeds = []
    for seed in ("-1", "-1", "11", "11"):
        node = launch("--launch-offset-pct", "2.0", "--launch-seed", seed)
        assert node.wait_healthy()
        speeds.append(httpx.get(node.url + "/server_info").json()["launch_speed"])
        node.stop()
    assert speeds[0] != speeds[1] and speeds[2] == speeds[3]
