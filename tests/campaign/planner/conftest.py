"""Shared fixtures: a playbook with a knob space, a campaign view with one dead end,
and the scripted OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from campaign.cli.wiring import local_source_tree as PatchManager
from campaign.domain.models import ConfigChange, EffectiveConfig, Fingerprint
from campaign.domain.records import BaselineView, CampaignView, DeadEnd, ExperimentView, Verdict
from campaign.planner.base import PlannerContext
from campaign.playbook.schema import Playbook
from tests.fake_openai import FakeOpenAI

API_KEY = "sk-test-SECRETSECRETSECRET1234567890"


def make_playbook(**planner: object) -> Playbook:
    return Playbook.model_validate(
        {
            "name": "eagle",
            "description": "EAGLE-3 on 8 PCIe GPUs",
            "workloads": {"chat": {"concurrency": [1, 64]}},
            "baseline": {"flags": {"tp-size": 8, "cuda-graph-max-bs": 160}},
            "planner": {
                "kind": "llm",
                "model": "fake-model",
                "timeout_s": 5,
                "max_retries": 2,
                "max_rejections": 3,
                **planner,
            },
            "knobs": {
                "flags": {
                    "cuda-graph-max-bs": {"type": "int", "min": 1, "max": 512},
                    "attention-backend": {"type": "choice", "choices": ["flashinfer", "triton", "fa3"]},
                    "enable-torch-compile": {"type": "bool"},
                    "mem-fraction-static": {"type": "float", "min": 0.5, "max": 0.95},
                    "speculative-algorithm": {"type": "str"},
                    "tp-size": {"type": "int", "min": 1, "max": 8},
                },
                "env": {
                    "NCCL_ALGO": {"type": "choice", "choices": ["Ring", "Tree"]},
                    "NCCL_MIN_NCHANNELS": {"type": "int", "min": 1, "max": 32},
                },
            },
            "hypotheses": [
                {"name": "nccl-ring", "env": {"NCCL_ALGO": "Ring"}},
                {"name": "cg-bs-256", "flags": {"cuda-graph-max-bs": 256}},
            ],
        }
    )


def make_view() -> CampaignView:
    dead = ExperimentView(
        id="e1",
        hypothesis="nccl-tree",
        source="playbook",
        config_diff=[ConfigChange(kind="env", key="NCCL_ALGO", after="Tree", change="added")],
        verdict=Verdict(kind="dead_end", reason="slower by 4.1% at C=64", headline_delta_pct=-4.1),
    )
    return CampaignView(
        id="c1",
        name="eagle",
        status="running",
        baseline=BaselineView(
            experiment_id="b0",
            config=EffectiveConfig(flags={"tp-size": 8, "cuda-graph-max-bs": 160}),
            figures={"chat": {1: 51.5, 64: 912.25}},
        ),
        experiments=[dead],
        dead_ends=[
            DeadEnd(
                hypothesis="nccl-tree",
                experiment_id="e1",
                reason="slower by 4.1% at C=64",
                revisit_on=["driver", "nccl"],
            )
        ],
        environment=Fingerprint(gpu="RTX PRO 6000 Blackwell", gpu_count=8, driver="575.51", cuda="12.8"),
    )


def make_ctx(playbook: Playbook | None = None, view: CampaignView | None = None, **kw: object) -> PlannerContext:
    pb = playbook or make_playbook()
    v = view or make_view()
    fields: dict[str, object] = {
        "tried": [e.hypothesis for e in v.experiments],
        "queue": list(pb.hypotheses),
        "source": PatchManager,
        **kw,
    }
    return PlannerContext(playbook=pb, view=v, **fields)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as srv:
        yield srv
