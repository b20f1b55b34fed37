"""The server a campaign launches: the engine's source, its launch settings, the baseline
configuration every hypothesis changes, and the load sweeps that measure it."""

from __future__ import annotations

from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from campaign.domain.models import WorkloadSpec
from campaign.domain.request_count import count_error
from campaign.domain.source import PatchRules, Unsafe
from campaign.playbook.common import ProblemAt, Scalar, Strict, env_values_to_str

__all__ = ["ConfigSpec", "ServerSpec", "SourceSpec", "WorkloadConfig", "no_shared_prompts"]


class SourceSpec(Strict):
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


class ServerSpec(Strict):
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


class ConfigSpec(Strict):
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

    _env_str = field_validator("env", mode="before")(lambda cls, v: env_values_to_str(v))


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


def no_shared_prompts(workloads: dict[str, WorkloadConfig]) -> None:
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
