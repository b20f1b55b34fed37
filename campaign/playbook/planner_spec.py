"""Where hypotheses come from beyond the playbook's queue: the LLM planner's endpoint and
limits, and the knob space every proposal is checked against."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from campaign.domain.source import Unsafe
from campaign.playbook.common import ProblemAt, Scalar, Strict

__all__ = ["CODE_PATH_ENV", "KnobSpace", "KnobSpec", "PatchPolicy", "PlannerSpec"]


class KnobSpec(Strict):
    """One knob the planner may turn: a type and a range or a list of choices."""

    type: Literal["int", "float", "bool", "choice", "str"] = Field(default="str", description="the value's type")
    min: float | None = Field(default=None, description="lowest value (int, float)", examples=[8])
    max: float | None = Field(default=None, description="highest value (int, float)", examples=[512])
    choices: list[Scalar] | None = Field(
        default=None, description="the allowed values (choice)", examples=[["fcfs", "lpm"]]
    )


class PatchPolicy(Strict):
    """Where a model-proposed patch may write."""

    repo: str = Field(description="the engine's git checkout the patches apply to", examples=["/opt/sglang"])
    allowed_paths: list[str] = Field(
        default_factory=list, description="paths a patch may touch", examples=[["python/sglang/srt/"]]
    )
    allow: list[Unsafe] = Field(
        default_factory=list,
        description=("unsafe patch contents to accept: symlink, executable, submodule, git_paths, binary"),
        examples=[["executable"]],
    )
    max_patch_bytes: int = Field(default=1_000_000, gt=0, description="a bigger patch is refused")


#: variables that choose what code a process loads: a model turning one of these runs
#: whatever it names (LD_PRELOAD=/tmp/x.so), so they are never planner knobs.
CODE_PATH_ENV = re.compile(
    r"^(LD_\w*|DYLD_\w*|PYTHON(PATH|HOME|STARTUP|USERBASE|INSPECT)|PATH|BASH_ENV|ENV"
    r"|PERL5LIB|PERL5OPT|RUBYOPT|RUBYLIB|NODE_OPTIONS|NODE_PATH|LUA_PATH|LUA_CPATH)$"
)


class KnobSpace(Strict):
    """What an LLM planner may change: every proposal is checked against it."""

    flags: dict[str, KnobSpec] = Field(default_factory=dict, description="flags the planner may set, by name")
    env: dict[str, KnobSpec] = Field(default_factory=dict, description="environment variables the planner may set")
    patches: PatchPolicy | None = Field(default=None, description="allow model-written patches, within these paths")

    @field_validator("env")
    @classmethod
    def _no_code_path_knobs(cls, v: dict[str, KnobSpec]) -> dict[str, KnobSpec]:
        for name in v:
            if CODE_PATH_ENV.match(name):
                raise ProblemAt(
                    f"{name} chooses the code a process loads: the planner may not set it (fix: "
                    "remove the knob; set it in baseline.env if the server needs it)",
                    name,
                )
        return v


class PlannerSpec(Strict):
    kind: Literal["queue", "llm"] = Field(
        default="queue",
        description=("queue: the playbook's hypotheses in order; llm: a model proposes more once the queue is empty"),
    )
    model: str = Field(default="gpt-4o-mini", description="the model name sent to the endpoint")
    temperature: float = Field(default=0.2, ge=0, le=2, description="sampling temperature")
    base_url: str | None = Field(
        default=None,
        description="an OpenAI-compatible endpoint; null: OPENAI_BASE_URL (else OpenAI's)",
        examples=["http://127.0.0.1:8011/v1"],
    )
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description=(
            "the variable holding the key for base_url; null: OPENAI_API_KEY, sent only to OPENAI_BASE_URL "
            "(or OpenAI's own), never to another base_url a playbook names"
        ),
        examples=["GPU_BOX_KEY"],
    )
    timeout_s: float = Field(default=60, gt=0, description="seconds one call may take")
    max_retries: int = Field(default=3, ge=0, description="retries of a failed call (bad answer, HTTP error)")
    max_rejections: int = Field(
        default=3,
        ge=0,
        description="invalid proposals per request, each answered with its reason, before the planner gives up",
    )
    max_proposals: int = Field(default=5, ge=0, description="proposals the model may make in the campaign")
    context_tokens: int = Field(default=6000, ge=500, description="the prompt's budget for the campaign's history")
    analyze: bool = Field(default=True, description="the model writes a short analysis after each verdict")
    max_tokens: int | None = Field(
        default=None,
        ge=16,
        description=("the cap on each answer's tokens (null: the endpoint's own); an answer cut off there is refused"),
        examples=[320],
    )
    structured: bool = Field(
        default=True,
        description=(
            "send the answer's JSON schema as `response_format`, so constrained decoding can only produce a "
            "schema-valid answer; false: ask for plain JSON"
        ),
    )
    seed: int | None = Field(
        default=None,
        description=(
            "sent as the request's `seed`: the same prompt then gets the same answer from an endpoint that honours it"
        ),
        examples=[0],
    )
    text_max_chars: int | None = Field(
        default=None,
        ge=20,
        description=(
            "the longest rationale, expected effect and analysis the schema allows (`maxLength`), so a small "
            "model ends its answer within max_tokens; null: unbounded"
        ),
        examples=[160],
    )
    max_changes: int | None = Field(
        default=None,
        ge=1,
        description=(
            "the most settings one proposal may change (flags set, env vars set, flags unset); null: any number"
        ),
        examples=[1],
    )
