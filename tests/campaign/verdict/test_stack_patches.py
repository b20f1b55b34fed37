"""Stacked wins that include patches are applied together, in queue order."""

from __future__ import annotations

from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.verdict.stack_check import subset_hypothesis


def test_the_stack_hypothesis_carries_every_win_patch_in_order() -> None:
    pb = Playbook.model_validate({"name": "t", "workloads": {"s": {"concurrency": [1]}}})
    wins = [
        ("a", 5.0, HypothesisSpec(name="a", patch="p/a.diff")),
        ("b", 4.0, HypothesisSpec(name="b", flags={"x": 1})),
        ("c", 3.0, HypothesisSpec(name="c", patch="p/c.diff")),
    ]
    assert subset_hypothesis(pb, wins, ["a", "b", "c"], 1).stack_patches == ["p/a.diff", "p/c.diff"]
    assert subset_hypothesis(pb, wins, ["b", "c"], 2).stack_patches == ["p/c.diff"]
