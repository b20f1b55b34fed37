"""The playbook: a campaign's whole definition, validated at the boundary.

Every model forbids unknown fields so that a misspelled key is an error with a
suggestion (see `campaign.playbook.load`), never a silently ignored setting.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from campaign.domain.errors import UserError
from campaign.domain.models import Fingerprint, WorkloadSpec
from campaign.domain.request_count import count_error
from campaign.domain.source import PatchRules, Unsafe
from campaign.playbook.nodes import NODE_SPECS, NodeSpec, NodeSpecBase, SimulatedNodeSpec, kind_of

Scalar = str | int | float | bool | None
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------------- server
class SourceSpec(_Strict):
    """The engine's git checkout on the node.  Every launch runs from a worktree of
    `ref` (patched ones from a commit of their patches); the checkout is only read."""

    repo: str = Field(description="the engine's git checkout (a path on the node)", examples=["/opt/sglang"])
    ref: str = Field(
        default="HEAD",
        description="the commit, branch or tag every launch runs from; its SHA is the fingerprint's engine_sha",
    )
    allowed_paths: list[str] | None = Field(
        default=None, description="where patches may write; null: anywhere in the repo"
    )
    allow: list[Unsafe] = Field(
        default_factory=list,
        description="unsafe patch contents to accept: symlink, executable, submodule, git_paths, binary",
        examples=[["executable"]],
    )
    max_patch_bytes: int = Field(
        default=1_000_000, gt=0, description="a bigger patch is refused, its size named, before git reads it"
    )

    def rules(self) -> PatchRules:
        return PatchRules(
            allowed_paths=self.allowed_paths, allow=list(self.allow), max_patch_bytes=self.max_patch_bytes
        )


class ServerSpec(_Strict):
    """How to launch the engine.  The engine's profile (`tools/engines/`) knows its launch
    command, environment defaults, health path and start-up time; set `command`,
    `health` or `startup_timeout_s` only to override it.  `command` is a template:
    {python} {port} {model} {host} {flags} are filled in; flags are rendered
    `--name value` (True -> `--name`).  `python` is the engine's interpreter (say, its
    own venv); default: the node's python."""

    engine: str = Field(
        default="simulated",
        description=(
            "the engine profile (tools/engines/): simulated, vllm or sglang; it gives the launch command, "
            "environment defaults, health path, start-up time, triage rules and metrics reader"
        ),
    )
    command: str | None = Field(
        default=None,
        description=(
            "the launch command template, overriding the profile's: {python} {port} {model} {host} {flags} "
            "{source} are filled in, each flag one argv item, no shell"
        ),
        examples=["{python} -m sglang.launch_server --model-path {model} --host {host} --port {port} {flags}"],
    )
    python: str | None = Field(
        default=None,
        description="the engine's interpreter (say, its own venv); null: the node's python",
        examples=[".campaign/vllm-venv/bin/python"],
    )
    model: str = Field(
        default="simulated-glm",
        description="the model served; the server's /v1/models must "
        "list it (a stranger's server is never taken for ours)",
    )
    health: str | None = Field(
        default=None, description="health path polled until the server is up; null: the profile's"
    )
    startup_timeout_s: float | None = Field(
        default=None, gt=0, description="seconds a start may take; null: the profile's"
    )
    allowed_flags: list[str] | None = Field(
        default=None,
        description="null: hypotheses may set any flag; else only these",
        examples=[["max-num-seqs", "max-num-batched-tokens"]],
    )
    source: SourceSpec | None = Field(
        default=None,
        description="the engine's git checkout: launches run from "
        "a worktree of it (`{source}`), needed for patch hypotheses",
    )

    #: variables the server inherits from the node's environment (names or PREFIX*);
    #: None: campaign.domain.server_env.DEFAULT_BASE_ENV plus the engine's own variables.
    #: Nothing else reaches it but the config's env (secrets only as ${NAME} references).
    base_env: list[str] | None = Field(
        default=None,
        description=(
            "the node's variables the server inherits (names or PREFIX*), replacing the default list; "
            "secret-named entries are refused"
        ),
        examples=[["PATH", "HOME", "CUDA_VISIBLE_DEVICES", "HF_*"]],
    )
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description=(
            "the controller's variable holding the server's own API key (its --api-key): the load generator "
            "sends it to this server and nowhere else; null: no request carries a credential"
        ),
        examples=["SERVER_API_KEY"],
    )

    @field_validator("base_env")
    @classmethod
    def _base_env_ok(cls, v: list[str] | None) -> list[str] | None:
        from campaign.domain.server_env import entry_problem

        for entry in v or []:
            problem = entry_problem(entry)
            if problem:
                raise ValueError(problem)
        return v


def _env_values_to_str(v: object) -> object:
    """YAML reads `NCCL_MIN_NCHANNELS: 2` as an int; the environment only has strings."""
    if isinstance(v, dict):
        return {k: (str(x).lower() if isinstance(x, bool) else str(x)) for k, x in v.items()}
    return v


class ConfigSpec(_Strict):
    """The baseline configuration every hypothesis changes."""

    flags: dict[str, Scalar] = Field(
        default_factory=dict,
        description=("engine flags without the leading dashes; true -> `--flag`, false or null -> no flag"),
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description=("environment variables for the server; secrets only as `${NAME}` references"),
        examples=[{"HF_TOKEN": "${HF_TOKEN}"}],
    )

    _env_str = field_validator("env", mode="before")(lambda cls, v: _env_values_to_str(v))


class WorkloadConfig(WorkloadSpec):
    """A named workload; the name is taken from its key in `workloads:`."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(default="", description="set from its key in `workloads:`; leave it out")

    @field_validator("requests_per_level")
    @classmethod
    def _counts_at_every_level(cls, v: str | int, info: ValidationInfo) -> str | int:
        """Refused at load, not at the first sweep: every level must get >= 1 request."""
        problem = count_error(v, info.data.get("concurrency") or [1])
        if problem is not None:
            raise ValueError(problem)
        return v


class ProblemAt(ValueError):
    """A problem a validator finds in one entry below the field it checks: `at` is the
    rest of its location (`campaign.playbook.load` reports that entry's line)."""

    def __init__(self, message: str, *at: str | int) -> None:
        super().__init__(message)
        self.at = at


def _no_shared_prompts(workloads: dict[str, WorkloadConfig]) -> None:
    """A launch runs its workloads one after another on one server: a second workload with
    the first's prompts would be served them from the prefix cache (SGLang's radix cache,
    vLLM's prefix caching) and read fast.  A fixed prompt is one cached prompt by design."""
    first: dict[tuple[object, ...], str] = {}
    for name, wl in workloads.items():
        if wl.prompts == "fixed":
            continue
        key: tuple[object, ...] = (
            ("diverse", wl.seed, wl.prompt_tokens) if wl.prompts == "diverse" else ("file", wl.prompts)
        )
        if key in first:
            what = (
                f"the same diverse prompts (seed {wl.seed}, prompt_tokens {wl.prompt_tokens})"
                if key[0] == "diverse"
                else f"the same prompts file {wl.prompts}"
            )
            fix = f"give '{name}' another seed" if key[0] == "diverse" else f"give '{name}' its own prompts file"
            raise ProblemAt(
                f"'{first[key]}' and '{name}' send {what}: in one launch the server's prefix cache "
                f"would serve '{name}' prompts it already read for '{first[key]}', and '{name}' "
                f"would read fast (fix: {fix})",
                name,
            )
        first[key] = name


# ------------------------------------------------------------------------ verdict
class RepeatsSpec(_Strict):
    min: int = Field(default=2, ge=1, description="interleaved rounds measured at least")
    max: int = Field(default=6, ge=1, description="rounds measured at most (adaptive policy)")
    baseline: int = Field(
        default=4,
        ge=2,
        description=(
            "launches of a baseline measured where the node has none in this environment yet "
            "(campaign start, a changed fingerprint): the noise floor the first experiments "
            "rest on (campaign.verdict.noise.baseline_launches)"
        ),
    )

    @model_validator(mode="after")
    def _order(self) -> RepeatsSpec:
        if self.max < self.min:
            raise ValueError(f"repeats.max ({self.max}) is below repeats.min ({self.min})")
        return self


class LatencyLimit(_Strict):
    metric: Literal["ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"] = Field(
        default="ttft_ms",
        description=(
            "the latency measured: time to first token, inter-token latency, time per output token, end to end"
        ),
    )
    stat: Literal["mean", "p50", "p90", "p99"] = Field(default="p99", description="the statistic of it per level")
    max_ms: float = Field(
        gt=0, description="the limit; at a level where only one side meets it, that side wins", examples=[500]
    )


class CorrectnessSpec(_Strict):
    enabled: bool = Field(
        default=True, description="compare greedy outputs with the baseline's before any speed verdict"
    )
    prompts: int = Field(default=8, ge=1, description="fixed prompts compared")
    max_tokens: int = Field(default=32, ge=1, description="greedy tokens generated per prompt")
    tolerance: float = Field(default=0.0, ge=0, le=1, description="share of prompts allowed to differ")


class VerdictSpec(_Strict):
    metric: Literal["output_tokens_per_s", "requests_per_s"] = Field(
        default="output_tokens_per_s", description=("the figure compared at every level")
    )
    min_effect_pct: float = Field(
        default=2.0,
        ge=0,
        description=(
            "the smallest change that counts: a WIN needs a level whose interval lies above it, and a loss "
            "beyond it ruled out everywhere"
        ),
    )
    confidence: float = Field(default=0.95, gt=0.5, lt=1, description="the family's confidence level")
    repeats: RepeatsSpec = Field(default_factory=RepeatsSpec, description="how many launches a side takes")
    policy: Literal["adaptive", "fixed"] = Field(
        default="adaptive",
        description=(
            "adaptive: look after every round from repeats.min to repeats.max and stop when decided; "
            "fixed: exactly repeats.min rounds"
        ),
    )
    interleave: bool = Field(
        default=True,
        description=("measure candidate and baseline in alternating rounds (C B C B) so the node's drift cancels"),
    )
    latency_limit: LatencyLimit | None = Field(default=None, description="a latency a side must meet to win a level")
    correctness: CorrectnessSpec = Field(default_factory=CorrectnessSpec, description="the greedy-output check")


class ReviewSpec(_Strict):
    after_no_win_streak: int | None = Field(
        default=None,
        ge=1,
        description=("stop for review (exit 3) after this many experiments in a row without a WIN"),
        examples=[7],
    )
    after_consecutive_dead_ends: int | None = Field(
        default=None, ge=1, description=("stop for review after this many DEAD ENDs in a row"), examples=[3]
    )
    before_patch: bool = Field(default=True, description="stop for approval before an engine patch is applied")
    on_environment_change: bool = Field(
        default=False,
        description=("stop for review when the node's fingerprint changes (CUDA, driver, engine version)"),
    )
    on_budget: bool = Field(
        default=True,
        description="stop for review when max_experiments, max_hours or max_queue_hours is reached, "
        "instead of finishing",
    )


class BudgetSpec(_Strict):
    max_experiments: int = Field(default=50, ge=1, description="experiments in the whole campaign")
    max_hours: float = Field(
        default=48, gt=0, description="node time; a Slurm job's wait in the queue is not node time"
    )
    max_queue_hours: float | None = Field(
        default=None, gt=0, description="time waiting for a Slurm allocation", examples=[12]
    )
    stop_after_dead_ends: int | None = Field(
        default=None, ge=1, description="finish after this many DEAD ENDs in a row", examples=[10]
    )
    max_infra_retries: int = Field(
        default=2,
        ge=0,
        description=(
            "retries of an infrastructure failure (node unreachable, port taken) before INCONCLUSIVE (infrastructure)"
        ),
    )


# ------------------------------------------------------------------------ planner
class KnobSpec(_Strict):
    """One knob the planner may turn: a type and a range or a list of choices."""

    type: Literal["int", "float", "bool", "choice", "str"] = Field(default="str", description="the value's type")
    min: float | None = Field(default=None, description="lowest value (int, float)", examples=[8])
    max: float | None = Field(default=None, description="highest value (int, float)", examples=[512])
    choices: list[Scalar] | None = Field(
        default=None, description="the allowed values (choice)", examples=[["fcfs", "lpm"]]
    )


class PatchPolicy(_Strict):
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


class KnobSpace(_Strict):
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


class PlannerSpec(_Strict):
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


# --------------------------------------------------------------------- hypotheses
class HypothesisSpec(_Strict):
    name: str = Field(description="unique; lowercase letters, digits, '.', '_' or '-'")
    rationale: str = Field(default="", description="why it might help: shown in the journal")
    flags: dict[str, Scalar] = Field(default_factory=dict, description="flags set on top of the baseline's")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="environment variables set on top of the baseline's; secrets only as `${NAME}` references",
    )
    unset_flags: list[str] = Field(
        default_factory=list, description="baseline flags to drop", examples=[["enforce-eager"]]
    )
    patch: str | None = Field(
        default=None,
        description="a unified diff for the engine's source "
        "(needs server.source); applied after approval at the review gate",
    )
    stack_patches: list[str] = Field(
        default_factory=list,
        description=("set by the stack check (the adopted wins' patches, in order); not for playbooks"),
    )
    declares: list[str] | None = Field(
        default=None,
        description=(
            "the settings under test; any other reported difference confounds the run; null: every key it sets"
        ),
    )
    adopt_if_win: bool = Field(default=False, description="a WIN becomes the baseline for later hypotheses")
    revisit_on: list[str] = Field(
        default_factory=list,
        description=(
            "fingerprint components (gpu, gpu_count, arch, driver, cuda, engine, engine_version, engine_sha, "
            "interconnect) whose change re-opens this dead end"
        ),
        examples=[["cuda"]],
    )
    depends_on: list[str] = Field(
        default_factory=list,
        description=("hypotheses that must be decided first (with several nodes, it then runs alone)"),
        examples=[["smaller-cuda-graph"]],
    )

    _env_str = field_validator("env", mode="before")(lambda cls, v: _env_values_to_str(v))

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("use lowercase letters, digits, '.', '_' or '-', starting with a letter or digit")
        return v

    @field_validator("revisit_on")
    @classmethod
    def _known_components(cls, v: list[str]) -> list[str]:
        """A component no fingerprint has would never change: the dead end would never reopen."""
        known = Fingerprint.component_names()
        for i, name in enumerate(v):
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
                fix = f"did you mean '{close[0]}'?" if close else f"use one of {', '.join(known)}"
                raise ProblemAt(f"'{name}' is not an environment component, so it would never change (fix: {fix})", i)
        return v

    def declared_keys(self) -> set[str]:
        if self.declares is not None:
            return set(self.declares)
        return set(self.flags) | set(self.env) | set(self.unset_flags)


class Playbook(_Strict):
    name: str = Field(
        description="the campaign's name (its id starts with it): a slug, up to 80 letters, digits, '-', '_' or '.'"
    )
    description: str = Field(default="", description="what the campaign is after; shown in the journal")
    journal: str = Field(
        default="journal/{name}.md", description="the living journal's path, relative to the working directory"
    )
    database: str = Field(
        default=".campaign/campaign.db",
        description="the record: a SQLite file, or a postgresql://user@host/dbname URL "
        "(no password: PGPASSWORD or a .pgpass); `--db` and CAMPAIGN_DATABASE_URL override it",
    )
    node: NodeSpec = Field(default_factory=SimulatedNodeSpec, description="where the server runs, chosen by `kind`")
    nodes: list[NodeSpec] = Field(
        default_factory=list,
        description=(
            "several nodes: independent hypotheses run in parallel, each compared with its own node's baseline"
        ),
    )
    server: ServerSpec = Field(default_factory=ServerSpec, description="how to launch the engine")
    baseline: ConfigSpec = Field(default_factory=ConfigSpec, description="the configuration hypotheses change")
    workloads: dict[str, WorkloadConfig] = Field(description="the load sweeps, by name; the first is the headline")
    verdict: VerdictSpec = Field(default_factory=VerdictSpec, description="how a result is decided")
    review: ReviewSpec = Field(default_factory=ReviewSpec, description="when the campaign stops for a human")
    budget: BudgetSpec = Field(default_factory=BudgetSpec, description="when the campaign ends")
    planner: PlannerSpec = Field(default_factory=PlannerSpec, description="where hypotheses come from")
    knobs: KnobSpace = Field(default_factory=KnobSpace, description="what an LLM planner may change")
    hypotheses: list[HypothesisSpec] = Field(default_factory=list, description="the ideas to test, in order")

    @field_validator("database")
    @classmethod
    def _database_is_a_file_or_postgres(cls, v: str) -> str:
        """A file path or a postgresql:// URL, checked before anything is written: the
        playbook is stored with the campaign, so a password in it would reach the database
        (the value is then not repeated)."""
        from campaign.domain.location import check

        try:
            return check(v, "database")
        except UserError as exc:
            raise ValueError(str(exc).removeprefix("database: ")) from None

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}", v):
            raise ValueError(
                f"{v!r} is not a slug (fix: up to 80 letters, digits, '-', '_' or '.', starting with a letter or digit)"
            )
        return v

    @field_validator("workloads")
    @classmethod
    def _name_workloads(cls, v: dict[str, WorkloadConfig]) -> dict[str, WorkloadConfig]:
        if not v:
            raise ValueError("at least one workload is needed")
        for key, wl in v.items():
            wl.name = key
        _no_shared_prompts(v)
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> Playbook:
        seen: set[str] = set()
        for h in self.hypotheses:
            if h.name in seen:
                raise ValueError(f"duplicate hypothesis name '{h.name}': names must be unique")
            seen.add(h.name)
        allowed = self.server.allowed_flags
        if allowed is not None:
            for h in self.hypotheses:
                for flag in list(h.flags) + h.unset_flags:
                    if flag not in allowed:
                        raise ValueError(
                            f"hypothesis '{h.name}' sets flag '{flag}' that server.allowed_flags does not list"
                        )
        if len(self.nodes) > 1:
            names = [n.node_name() for n in self.nodes]
            if len(set(names)) < len(names):
                raise ValueError(f"nodes: names {names} repeat: give every node its own `name`")
            if not self.verdict.interleave:
                raise ValueError(
                    "verdict.interleave: several nodes need interleaved baseline runs "
                    "(each candidate is compared with its own node's baseline): set it to true"
                )
        self.journal = self.journal.replace("{name}", self.name)
        return self

    @property
    def headline_workload(self) -> str:
        """The workload whose lowest level is the headline figure: the first one."""
        return next(iter(self.workloads))

    def all_nodes(self) -> list[NodeSpecBase]:
        return list(self.nodes) if self.nodes else [self.node]

    def hypothesis(self, name: str) -> HypothesisSpec | None:
        return next((h for h in self.hypotheses if h.name == name), None)


def use_node_kinds(specs: Iterable[type[NodeSpecBase]]) -> None:
    """Make `specs` the playbook's node kinds (the composition root passes the executor
    registry's): the `node:` union, its error messages and the JSON Schema follow them."""
    wanted = {kind_of(spec): spec for spec in specs}
    if wanted == NODE_SPECS:
        return
    NODE_SPECS.clear()
    NODE_SPECS.update(wanted)
    Playbook.model_rebuild(force=True)
