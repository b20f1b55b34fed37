"""The playbook: a campaign's whole definition, validated at the boundary.

Every model forbids unknown fields so that a misspelled key is an error with a
suggestion (see `campaign.playbook.load`), never a silently ignored setting.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from campaign.domain.models import WorkloadSpec
from campaign.domain.request_count import count_error
from campaign.domain.source import PatchRules, Unsafe

Scalar = str | int | float | bool | None
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- node
class _NodeSpecBase(_Strict):
    """What every node kind answers, so that nothing outside the executor registry
    branches on `kind`: where the node's code and files live, and how it is named."""

    #: the node is another machine: its python and workdir are the spec's, the server binds 0.0.0.0
    remote: ClassVar[bool] = False

    def simulated_node(self) -> SimulatedNodeSpec | None:
        """The simulated node this spec runs (itself, or the one it hosts), None for a real engine."""
        return None

    def node_python(self) -> str | None:
        """The python on the node; None: the controller's own interpreter."""
        return getattr(self, "python", None) if self.remote else None

    def node_workdir(self) -> str | None:
        """The workdir on the node; None: under the controller's database directory."""
        return getattr(self, "workdir", None) if self.remote else None

    def sweep_location(self) -> str:
        """Where the load generator runs: "controller", or "node" (next to the server)."""
        return "controller"

    def describe(self) -> str:
        return f"{getattr(self, 'kind', 'node')} {getattr(self, 'name', '')}".strip()


class SimulatedNodeSpec(_NodeSpecBase):
    """The bundled simulated GPU node, started locally."""

    kind: Literal["simulated"] = "simulated"
    name: str = "sim-0"
    profile: str = "rtx6000bw-pcie-8x"
    cuda: str = "12.8"
    seed: int = 0
    time_scale: float = Field(default=1.0, gt=0, description="node seconds per wall second")
    noise_pct: float = Field(default=1.5, ge=0, le=20, description="per-step jitter (%), seeded")
    launch_offset_pct: float = Field(
        default=1.5, ge=0, le=20,
        description="each launch's speed offset (%, log-normal spread), drawn afresh per launch and shared "
                    "by every level it serves, as on a real server; 0 turns it off")
    launch_offsets: Literal["fresh", "seeded"] = Field(
        default="fresh",
        description="fresh: each launch draws its offset from OS entropy, as a real server lands; seeded: from "
                    "`seed` and the launch's name (hypothesis, side, round), so a campaign replays the same offsets "
                    "(a reproducible demo); the command template passes it as --launch-seed {launch_seed}")

    def simulated_node(self) -> SimulatedNodeSpec | None:
        return self

    def describe(self) -> str:
        return f"simulated {self.profile} (CUDA {self.cuda})"


class LocalNodeSpec(_NodeSpecBase):
    """This machine, running a real engine."""

    kind: Literal["local"]
    name: str = "local"
    workdir: str = ".campaign/node"


class SshNodeSpec(_NodeSpecBase):
    remote: ClassVar[bool] = True
    kind: Literal["ssh"]
    name: str = ""
    host: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    ssh_options: list[str] = Field(default_factory=list)
    workdir: str = "~/.cache/campaign-node"  # on the node; made 0700, refused if shared
    python: str = "python3"
    sweep_on: Literal["node", "controller"] = "node"
    simulated: SimulatedNodeSpec | None = None  # run the simulated node on that host

    def simulated_node(self) -> SimulatedNodeSpec | None:
        return self.simulated

    def sweep_location(self) -> str:
        return self.sweep_on

    def describe(self) -> str:
        return f"ssh {self.host}"


class SlurmNodeSpec(_NodeSpecBase):
    remote: ClassVar[bool] = True
    kind: Literal["slurm"]
    name: str = "slurm"
    partition: str | None = None
    gres: str | None = "gpu:8"
    gpus: int | None = None
    time_limit: str = "01:00:00"
    exclusive: bool = True
    max_parallel_jobs: int = 1
    workdir: str = "~/.cache/campaign-slurm"  # on the shared filesystem; made 0700, refused if shared
    python: str = "python3"
    simulated: SimulatedNodeSpec | None = None

    def simulated_node(self) -> SimulatedNodeSpec | None:
        return self.simulated


NodeSpec = Annotated[
    SimulatedNodeSpec | LocalNodeSpec | SshNodeSpec | SlurmNodeSpec, Field(discriminator="kind")
]

#: kind -> spec class (the discriminated union above, as a lookup for error messages)
NODE_SPECS: dict[str, type[_NodeSpecBase]] = {
    "simulated": SimulatedNodeSpec, "local": LocalNodeSpec, "ssh": SshNodeSpec, "slurm": SlurmNodeSpec,
}


# ------------------------------------------------------------------------- server
class SourceSpec(_Strict):
    """The engine's git checkout on the node.  Every launch runs from a worktree of
    `ref` (patched ones from a commit of their patches); the checkout is only read."""

    repo: str
    ref: str = "HEAD"
    allowed_paths: list[str] | None = None  # where patches may write; None: anywhere in the repo
    allow: list[Unsafe] = Field(default_factory=list)  # symlink, executable, submodule, git_paths, binary
    max_patch_bytes: int = Field(default=1_000_000, gt=0)  # a bigger patch is refused, its size named

    def rules(self) -> PatchRules:
        return PatchRules(allowed_paths=self.allowed_paths, allow=list(self.allow),
                          max_patch_bytes=self.max_patch_bytes)


class ServerSpec(_Strict):
    """How to launch the engine.  The engine's profile (`tools/engines/`) knows its launch
    command, environment defaults, health path and start-up time; set `command`,
    `health` or `startup_timeout_s` only to override it.  `command` is a template:
    {python} {port} {model} {host} {flags} are filled in; flags are rendered
    `--name value` (True -> `--name`).  `python` is the engine's interpreter (say, its
    own venv); default: the node's python."""

    engine: str = "simulated"  # a profile name in tools/engines (checked where adapters are picked)
    command: str | None = None
    python: str | None = None
    model: str = "simulated-glm"
    health: str | None = None
    startup_timeout_s: float | None = Field(default=None, gt=0)
    allowed_flags: list[str] | None = None  # None: any flag; else hypotheses may only set these
    source: SourceSpec | None = None  # the engine's source: launches run from `{source}`

    #: variables the server inherits from the node's environment (names or PREFIX*);
    #: None: campaign.domain.server_env.DEFAULT_BASE_ENV plus the engine's own variables.
    #: Nothing else reaches it but the config's env (secrets only as ${NAME} references).
    base_env: list[str] | None = None
    #: the controller's variable holding the server's own API key (its `--api-key`): the
    #: load generator sends `Authorization: Bearer` with it to this server and nowhere
    #: else.  None: no request carries a credential.
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

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
    flags: dict[str, Scalar] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)

    _env_str = field_validator("env", mode="before")(lambda cls, v: _env_values_to_str(v))


class WorkloadConfig(WorkloadSpec):
    """A named workload; the name is taken from its key in `workloads:`."""

    model_config = ConfigDict(extra="forbid")
    name: str = ""

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
        key: tuple[object, ...] = ("diverse", wl.seed, wl.prompt_tokens) if wl.prompts == "diverse" else ("file", wl.prompts)
        if key in first:
            what = (f"the same diverse prompts (seed {wl.seed}, prompt_tokens {wl.prompt_tokens})"
                    if key[0] == "diverse" else f"the same prompts file {wl.prompts}")
            fix = f"give '{name}' another seed" if key[0] == "diverse" else f"give '{name}' its own prompts file"
            raise ProblemAt(f"'{first[key]}' and '{name}' send {what}: in one launch the server's prefix cache "
                            f"would serve '{name}' prompts it already read for '{first[key]}', and '{name}' "
                            f"would read fast (fix: {fix})", name)
        first[key] = name


# ------------------------------------------------------------------------ verdict
class RepeatsSpec(_Strict):
    min: int = Field(default=2, ge=1)
    max: int = Field(default=6, ge=1)
    baseline: int = Field(default=4, ge=2, description=(
        "launches of a baseline measured where the node has none in this environment yet "
        "(campaign start, a changed fingerprint): the noise floor the first experiments "
        "rest on (campaign.verdict.noise.baseline_launches)"))

    @model_validator(mode="after")
    def _order(self) -> RepeatsSpec:
        if self.max < self.min:
            raise ValueError(f"repeats.max ({self.max}) is below repeats.min ({self.min})")
        return self


class LatencyLimit(_Strict):
    metric: Literal["ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"] = "ttft_ms"
    stat: Literal["mean", "p50", "p90", "p99"] = "p99"
    max_ms: float = Field(gt=0)


class CorrectnessSpec(_Strict):
    enabled: bool = True
    prompts: int = Field(default=8, ge=1)
    max_tokens: int = Field(default=32, ge=1)
    tolerance: float = Field(default=0.0, ge=0, le=1, description="share of prompts allowed to differ")


class VerdictSpec(_Strict):
    metric: Literal["output_tokens_per_s", "requests_per_s"] = "output_tokens_per_s"
    min_effect_pct: float = Field(default=2.0, ge=0)
    confidence: float = Field(default=0.95, gt=0.5, lt=1)
    repeats: RepeatsSpec = Field(default_factory=RepeatsSpec)
    policy: Literal["adaptive", "fixed"] = "adaptive"
    interleave: bool = True
    latency_limit: LatencyLimit | None = None
    correctness: CorrectnessSpec = Field(default_factory=CorrectnessSpec)


class ReviewSpec(_Strict):
    after_no_win_streak: int | None = Field(default=None, ge=1)
    after_consecutive_dead_ends: int | None = Field(default=None, ge=1)
    before_patch: bool = True
    on_environment_change: bool = False
    on_budget: bool = True


class BudgetSpec(_Strict):
    max_experiments: int = Field(default=50, ge=1)
    max_hours: float = Field(default=48, gt=0)  # node time; a Slurm queue wait is not node time
    max_queue_hours: float | None = Field(default=None, gt=0)  # time waiting for an allocation
    stop_after_dead_ends: int | None = Field(default=None, ge=1)
    max_infra_retries: int = Field(default=2, ge=0)


# ------------------------------------------------------------------------ planner
class KnobSpec(_Strict):
    """One knob the planner may turn: a type and a range or a list of choices."""

    type: Literal["int", "float", "bool", "choice", "str"] = "str"
    min: float | None = None
    max: float | None = None
    choices: list[Scalar] | None = None


class PatchPolicy(_Strict):
    repo: str
    allowed_paths: list[str] = Field(default_factory=list)
    allow: list[Unsafe] = Field(default_factory=list)  # symlink, executable, submodule, git_paths, binary
    max_patch_bytes: int = Field(default=1_000_000, gt=0)


#: variables that choose what code a process loads: a model turning one of these runs
#: whatever it names (LD_PRELOAD=/tmp/x.so), so they are never planner knobs.
CODE_PATH_ENV = re.compile(r"^(LD_\w*|DYLD_\w*|PYTHON(PATH|HOME|STARTUP|USERBASE|INSPECT)|PATH|BASH_ENV|ENV"
                           r"|PERL5LIB|PERL5OPT|RUBYOPT|RUBYLIB|NODE_OPTIONS|NODE_PATH|LUA_PATH|LUA_CPATH)$")


class KnobSpace(_Strict):
    flags: dict[str, KnobSpec] = Field(default_factory=dict)
    env: dict[str, KnobSpec] = Field(default_factory=dict)
    patch_files: list[str] = Field(default_factory=list)
    patches: PatchPolicy | None = None

    @field_validator("env")
    @classmethod
    def _no_code_path_knobs(cls, v: dict[str, KnobSpec]) -> dict[str, KnobSpec]:
        for name in v:
            if CODE_PATH_ENV.match(name):
                raise ProblemAt(f"{name} chooses the code a process loads: the planner may not set it (fix: "
                                "remove the knob; set it in baseline.env if the server needs it)", name)
        return v


class PlannerSpec(_Strict):
    kind: Literal["queue", "llm"] = "queue"
    model: str = "gpt-4o-mini"
    temperature: float = Field(default=0.2, ge=0, le=2)
    base_url: str | None = None  # else OPENAI_BASE_URL
    #: the variable holding the key for `base_url`.  None: OPENAI_API_KEY, sent only to
    #: OPENAI_BASE_URL (or OpenAI's own), never to another base_url a playbook names
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    timeout_s: float = Field(default=60, gt=0)
    max_retries: int = Field(default=3, ge=0)
    max_rejections: int = Field(default=3, ge=0)
    max_proposals: int = Field(default=5, ge=0)
    context_tokens: int = Field(default=6000, ge=500)
    analyze: bool = True
    #: the cap on each answer's tokens sent to the endpoint (None: the endpoint's own); an answer
    #: cut off there is refused like any other invalid one
    max_tokens: int | None = Field(default=None, ge=16)
    #: send the answer's JSON schema as `response_format` (json_schema, strict), so an endpoint
    #: with constrained decoding can only produce a schema-valid answer; false: ask for plain JSON
    structured: bool = True
    #: sent as the request's `seed` (OpenAI, vLLM): with a temperature above 0, the same prompt
    #: then gets the same answer from an endpoint that honours it; None: no seed
    seed: int | None = None
    #: the longest rationale, expected effect and analysis the schema allows (`maxLength`), so a
    #: small model under constrained decoding ends its answer within max_tokens; None: unbounded
    #: (OpenAI's strict mode documents no string lengths)
    text_max_chars: int | None = Field(default=None, ge=20)
    #: the most settings one proposal may change (flags set, env vars set, flags unset): the
    #: schema bounds each list to it (a constrained decoder cannot repeat a knob in a list of
    #: one) and validation counts them all; None: any number
    max_changes: int | None = Field(default=None, ge=1)


# --------------------------------------------------------------------- hypotheses
class HypothesisSpec(_Strict):
    name: str
    rationale: str = ""
    flags: dict[str, Scalar] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    unset_flags: list[str] = Field(default_factory=list)
    patch: str | None = None
    stack_patches: list[str] = Field(default_factory=list)  # set by the stack check: wins' patches, in order
    declares: list[str] | None = None  # settings under test; default: every key changed
    adopt_if_win: bool = False
    revisit_on: list[str] = Field(default_factory=list)  # fingerprint components
    depends_on: list[str] = Field(default_factory=list)

    _env_str = field_validator("env", mode="before")(lambda cls, v: _env_values_to_str(v))

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("use lowercase letters, digits, '.', '_' or '-', starting with a letter or digit")
        return v

    def declared_keys(self) -> set[str]:
        if self.declares is not None:
            return set(self.declares)
        return set(self.flags) | set(self.env) | set(self.unset_flags)


class Playbook(_Strict):
    #: a slug: it names the campaign ids, the branches and the default journal's file
    name: str
    description: str = ""
    journal: str = "journal/{name}.md"
    database: str = ".campaign/campaign.db"
    node: NodeSpec = Field(default_factory=SimulatedNodeSpec)
    nodes: list[NodeSpec] = Field(default_factory=list)  # several nodes: hypotheses in parallel
    server: ServerSpec = Field(default_factory=ServerSpec)
    baseline: ConfigSpec = Field(default_factory=ConfigSpec)
    workloads: dict[str, WorkloadConfig]
    verdict: VerdictSpec = Field(default_factory=VerdictSpec)
    review: ReviewSpec = Field(default_factory=ReviewSpec)
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    planner: PlannerSpec = Field(default_factory=PlannerSpec)
    knobs: KnobSpace = Field(default_factory=KnobSpace)
    hypotheses: list[HypothesisSpec] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}", v):
            raise ValueError(f"{v!r} is not a slug (fix: up to 80 letters, digits, '-', '_' or '.', "
                             "starting with a letter or digit)")
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
            names = [n.name or getattr(n, "host", "") for n in self.nodes]
            if len(set(names)) < len(names):
                raise ValueError(f"nodes: names {names} repeat: give every node its own `name`")
            if not self.verdict.interleave:
                raise ValueError("verdict.interleave: several nodes need interleaved baseline runs "
                                 "(each candidate is compared with its own node's baseline): set it to true")
        self.journal = self.journal.replace("{name}", self.name)
        return self

    @property
    def headline_workload(self) -> str:
        """The workload whose lowest level is the headline figure: the first one."""
        return next(iter(self.workloads))

    def all_nodes(self) -> list[SimulatedNodeSpec | LocalNodeSpec | SshNodeSpec | SlurmNodeSpec]:
        return list(self.nodes) if self.nodes else [self.node]

    def hypothesis(self, name: str) -> HypothesisSpec | None:
        return next((h for h in self.hypotheses if h.name == name), None)
