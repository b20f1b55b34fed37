"""Boundary models shared by everything that touches a node.

These are the contracts between `tools/` (executors, launch, load sweeps, the
simulated node) and `campaign/` (graph, store, verdict, journal).  They are
plain pydantic models so that every boundary validates what crosses it and so
that the store can keep them as JSON.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, Field


class FailureClass(str, Enum):
    """Why a launch or a measurement failed: the small triage taxonomy."""

    oom = "oom"
    assertion = "assertion"
    unsupported_arch = "unsupported_arch"
    jit_error = "jit_error"
    cuda_graph_incompatible = "cuda_graph_incompatible"
    nccl_error = "nccl_error"
    bad_flag = "bad_flag"
    port_in_use = "port_in_use"
    health_timeout = "health_timeout"
    exited = "exited"
    patch_conflict = "patch_conflict"  # the patch does not apply to the base
    patch_refused = "patch_refused"  # the patch writes outside its allowed paths or an unsafe shape
    stack_conflict = "stack_conflict"  # stacked patches that each apply alone conflict together
    incorrect = "incorrect"  # outputs differ from the baseline's (correctness gate)
    hang = "hang"  # server alive but produces no tokens
    server_error = "server_error"  # HTTP 5xx while serving
    unreachable = "unreachable"  # node or server cannot be reached (infrastructure)
    engine_dead = "engine_dead"  # vLLM EngineDeadError while serving
    kernel_fault = "kernel_fault"  # a GPU kernel faulted: illegal memory access / address / instruction
    environment = (
        "environment"  # the node lacks what the engine needs: a library, package version, driver or credential
    )


#: failure classes caused by the infrastructure rather than by the idea under test:
#: retried a bounded number of times instead of becoming dead ends.
INFRASTRUCTURE_FAILURES = frozenset({FailureClass.port_in_use, FailureClass.unreachable})


class Failure(BaseModel):
    """A classified failure with the evidence that supports the class."""

    failure_class: FailureClass
    summary: str
    evidence: list[str] = Field(default_factory=list)  # log lines that decided the class
    exit_code: int | None = None
    phase: Literal["patch", "start", "load", "correctness"] = "start"
    #: False when no signature matched (the class is then `exited`, the evidence the last lines)
    matched: bool = True
    #: the LLM's class for an unmatched log: a suggestion shown beside the class, never the class
    suggested_class: FailureClass | None = None
    #: the server's log on its node, where the rest of the story is (None: no server log)
    log_path: str | None = None

    def shown(self) -> dict[str, object]:
        """What a person reads of it (`show --json`): the class, the lines that decided
        it (or, when no signature matched, the log's last lines) and where the log is."""
        return {
            "class": self.failure_class.value,
            "summary": self.summary,
            "phase": self.phase,
            "exit_code": self.exit_code,
            "deciding_lines": list(self.evidence),
            "log_path": self.log_path,
            "suggested_class": self.suggested_class.value if self.suggested_class else None,
        }


class Stat(BaseModel):
    """Distribution summary in milliseconds (node time)."""

    mean: float = 0.0
    p50: float = 0.0
    p90: float = 0.0
    p99: float = 0.0


class LevelResult(BaseModel):
    """One concurrency level of one load sweep (one repeat)."""

    concurrency: int
    requests: int
    errors: int = 0
    output_tokens: int = 0
    input_tokens: int = 0
    duration_s: float = 0.0  # node time
    output_tokens_per_s: float = 0.0
    requests_per_s: float = 0.0
    ttft_ms: Stat = Field(default_factory=Stat)
    itl_ms: Stat = Field(default_factory=Stat)
    tpot_ms: Stat = Field(default_factory=Stat)
    e2e_ms: Stat = Field(default_factory=Stat)
    token_source: Literal["usage", "chunks"] = "usage"
    error_samples: list[str] = Field(default_factory=list)


class WorkloadSpec(BaseModel):
    """What load to put on a server: the unit two results must share to be compared."""

    name: str
    concurrency: list[int] = Field(default_factory=lambda: [1], description="the concurrency levels swept")
    prompts: str = Field(
        default="fixed",
        description=(
            "fixed (one prompt, cached by design), diverse (generated from seed and prompt_tokens, as many as the "
            'sweep sends) or a JSONL file of {"prompt": ...} lines; a sweep sends each prompt once'
        ),
    )
    output_tokens: int = Field(default=256, description="tokens generated per request")
    requests_per_level: str | int = Field(
        default="2*C",
        description=(
            "an integer or an expression in C (numbers, + - * / // % **, max min ceil floor round int), at least "
            "1 at every level"
        ),
    )
    warmup_requests: int = Field(default=1, description="requests sent before a level's measurement")
    prompt_tokens: int = Field(default=512, description="approximate length of generated prompts")
    seed: int = Field(default=0, description="seed of the generated prompt set")
    endpoint: Literal["completions", "chat"] = Field(
        default="completions", description=("/v1/completions or /v1/chat/completions")
    )


class SweepResult(BaseModel):
    """A whole load sweep: every level of one workload against one server."""

    url: str = ""
    model: str = ""
    workload: WorkloadSpec | None = None
    prompt_set_hash: str = ""
    # how the load generator handed the prompts out (`campaign.domain.work`); JSON
    # written before the field existed came from protocol 1
    protocol: int = 1
    time_scale: float = 1.0  # node seconds per wall second; all figures are node time
    source: Literal["campaign", "sglang", "vllm"] = "campaign"
    levels: list[LevelResult] = Field(default_factory=list)

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)


class CommandResult(BaseModel):
    """A finished short command on a node."""

    returncode: int
    stdout: str = ""
    stderr: str = ""


class ProcessHandle(BaseModel):
    """A long-lived process started by an executor.  Serializable so a run ledger
    can reap it after the controller died."""

    executor: str  # the executor kind: local | ssh | slurm
    pid: int | None = None  # pid on the node (== pgid: started as a group leader)
    pgid: int | None = None
    host: str = "127.0.0.1"
    job_id: str | None = None  # Slurm job id
    log_path: str = ""
    started_at: float = 0.0
    command: str = ""  # redacted command line, for the record


class EffectiveConfig(BaseModel):
    """The exact flags and environment a server runs with."""

    flags: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)


ConfigValue = str | int | float | bool | None


class ConfigChange(BaseModel):
    """One setting that differs.  `reported`: seen in what the servers report, not in the
    requested configs; `ignored`/`overridden`: a declared flag the candidate's server ran at
    the baseline's value / at a value other than `requested`."""

    kind: Literal["flag", "env"]
    key: str
    before: ConfigValue = None
    after: ConfigValue = None
    change: Literal["added", "removed", "changed", "ignored", "overridden"]
    reported: bool = False
    requested: ConfigValue = None


class ReportedConfig(EffectiveConfig):
    """The configuration a server says it runs, in the command line's spelling (flags
    without dashes), with what its engine profile knows about it: `derived_from` names
    the flags a reported setting follows from (the server resolves it from them), and
    `aliases` maps another spelling of a flag to the reported one (`tp` -> `tp-size`).
    Recorded per side, so the confound check is a pure function of the record."""

    derived_from: dict[str, list[str]] = Field(default_factory=dict)
    aliases: dict[str, str] = Field(default_factory=dict)
    #: settings reported as an object's text (`SpeculativeConfig(...)`), not in the request's
    #: spelling: the two sides are compared, the request is not compared with them
    opaque: list[str] = Field(default_factory=list)


ReportedStatus = Literal["declared", "follows", "ignored", "overridden", "undeclared"]


class ReportedChange(BaseModel):
    """One line of the reported diff: a setting both servers report, as each reports it.
    `declared`: the hypothesis changes it; `follows`: derived from the flags in `follows`
    (declared, or themselves a listed difference); `ignored`: declared, but the candidate's
    server reports the baseline's value; `overridden`: declared, but it runs another value
    than `requested`; `undeclared`: nothing explains it (the run is confounded)."""

    kind: Literal["flag", "env"]
    key: str
    baseline: ConfigValue = None
    candidate: ConfigValue = None
    requested: ConfigValue = None
    status: ReportedStatus
    follows: list[str] = Field(default_factory=list)

    @property
    def confounds(self) -> bool:
        return self.status in ("ignored", "overridden", "undeclared")


#: library versions a node may report besides the fixed components (the simulated node does)
LIBRARY_COMPONENTS = ("torch", "nccl", "flashinfer", "profile")


class Fingerprint(BaseModel):
    """The environment a measurement was taken in.  `components` is what revisit
    conditions refer to (cuda, driver, arch, engine, torch, nccl, interconnect...)."""

    gpu: str = ""
    gpu_count: int = 0
    arch: str = ""
    driver: str = ""
    cuda: str = ""
    engine: str = ""
    engine_version: str = ""
    engine_sha: str = ""
    interconnect: str = ""
    host: str = ""
    extra: dict[str, str] = Field(default_factory=dict)

    def components(self) -> dict[str, str]:
        base = {
            "gpu": self.gpu,
            "gpu_count": str(self.gpu_count),
            "arch": self.arch,
            "driver": self.driver,
            "cuda": self.cuda,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "engine_sha": self.engine_sha,
            "interconnect": self.interconnect,
        }
        base.update(self.extra)
        return base

    @classmethod
    def component_names(cls) -> list[str]:
        """What a revisit condition may name: the fixed components, then the libraries."""
        return [*cls().components(), *LIBRARY_COMPONENTS]
