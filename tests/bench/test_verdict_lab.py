"""The verdict lab's fast subset: the direct driver makes the same calls as the real
graph (same verdicts, same rounds, launch by launch), and at a per-launch noise of 1%
no verdict of a small lab run is wrong."""

from __future__ import annotations

from bench.lab_engine import LabNode, true_kind
from bench.verdict_lab import (
    PLAYBOOK,
    campaign_setup,
    policies,
    run_direct,
    run_graph,
    score,
)
from campaign.loop.experiment import workloads_of
from campaign.playbook.load import load_playbook


def test_the_direct_driver_gives_the_graphs_verdicts():
    pb = load_playbook(str(PLAYBOOK))
    wl = workloads_of(pb)
    spec = policies(pb.verdict)["adaptive"]
    st, cases = campaign_setup("heavy_tail", 1, 6, wl, spec.min_effect_pct)
    direct = run_direct(LabNode("t", st, cases, wl), spec, wl, 6)
    graph = run_graph(LabNode("t", st, cases, wl), spec, pb, 6)
    assert sorted(graph) == direct
    assert {k for _, k, _ in direct} - {"inconclusive"}  # something was decided


def test_no_wrong_verdict_at_one_percent_launch_noise():
    pb = load_playbook(str(PLAYBOOK))
    wl = workloads_of(pb)
    spec = policies(pb.verdict)["adaptive"]
    rows = []
    for structure in ("offset", "noisy_candidate"):
        for index in range(2):
            st, cases = campaign_setup(structure, index, 25, wl, spec.min_effect_pct, offset_pct=1.0)
            for i, kind, rounds in run_direct(LabNode(f"{structure}{index}", st, cases, wl), spec, wl, 25):
                rows.append({"truth": true_kind(cases[i], pb.verdict), "kind": kind, "rounds": rounds,
                             "strength": 0.0, "offset_pct": 1.0})
    sc = score(rows)
    assert sc["n"] == 100 and sc["wrong"] == 0
    assert sc["missed"] < sc["decisive"] / 2 and sc["rounds"] < 4
