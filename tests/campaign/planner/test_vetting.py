"""Dead ends and duplicates are judged by effective change, not by name alone."""

from __future__ import annotations

from campaign.planner.schemas import Proposal
from campaign.planner.vetting import vet_proposal
from tests.campaign.planner.conftest import make_ctx


def vet(ctx=None, **fields):  # type: ignore[no-untyped-def]
    c = ctx or make_ctx()
    return vet_proposal(Proposal(name=fields.pop("name", "new-idea"), **fields), c, c.playbook.knobs)


def test_a_fresh_change_becomes_a_hypothesis() -> None:
    h, problems = vet(flags={"attention-backend": "fa3"}, env={"NCCL_MIN_NCHANNELS": 8}, rationale=" r ")
    assert problems == [] and h is not None
    assert h.flags == {"attention-backend": "fa3"} and h.env == {"NCCL_MIN_NCHANNELS": "8"} and h.rationale == "r"


def test_a_dead_end_under_another_name_is_refused_with_its_revisit_condition() -> None:
    h, problems = vet(name="tree-again", env={"NCCL_ALGO": "Tree"})
    assert h is None
    assert "repeats dead end 'nccl-tree'" in problems[0] and "driver, nccl" in problems[0]


def test_a_reopened_dead_end_may_be_revisited() -> None:
    h, problems = vet(
        ctx=make_ctx(reopened=["nccl-tree"]), name="nccl-tree", env={"NCCL_ALGO": "Tree"}, revisit_of="nccl-tree"
    )
    assert problems == [] and h is not None and h.name == "nccl-tree"


def test_revisit_of_a_dead_end_that_is_not_reopened_is_refused() -> None:
    _, problems = vet(env={"NCCL_ALGO": "Tree"}, revisit_of="nccl-tree")
    assert problems == ["revisit_of 'nccl-tree' is a dead end that is not reopened"]
    _, problems = vet(env={"NCCL_ALGO": "Ring"}, revisit_of="never-ran")
    assert problems == ["revisit_of 'never-ran' is not a recorded dead end"]


def test_duplicates_by_name_and_by_change() -> None:
    _, problems = vet(name="cg-bs-256", flags={"cuda-graph-max-bs": 300})
    assert "the name 'cg-bs-256' is already tried or queued" in problems[0]
    _, problems = vet(name="bigger-graphs", flags={"cuda-graph-max-bs": "256"})  # same value, other spelling
    assert "same change as 'cg-bs-256'" in problems[0]


def test_setting_the_baseline_value_changes_nothing() -> None:
    _, problems = vet(flags={"tp-size": 8})
    assert problems == ["changes nothing relative to the current baseline"]
    _, problems = vet(unset_flags=["attention-backend"])  # not set in the baseline
    assert problems == ["changes nothing relative to the current baseline"]
    h, problems = vet(unset_flags=["cuda-graph-max-bs"])
    assert problems == [] and h is not None and h.unset_flags == ["cuda-graph-max-bs"]


def test_all_setting_problems_are_reported_together() -> None:
    _, problems = vet(name="Bad Name", flags={"cuda-graph-max-bs": 9999, "rm": "-rf"})
    assert len(problems) == 3
