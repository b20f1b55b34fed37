"""The playbook: a campaign's whole definition, validated at the boundary.

The sections live in their own modules (`server_spec`, `policy`, `planner_spec`, on
`common`'s strict base); the hypotheses and the playbook that holds them all are here,
and every model is importable from here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from pydantic import Field, field_validator, model_validator

from campaign.domain.errors import UserError
from campaign.domain.models import Fingerprint
from campaign.playbook.common import ProblemAt, Scalar, Strict, env_values_to_str
from campaign.playbook.nodes import NODE_SPECS, NodeSpec, NodeSpecBase, SimulatedNodeSpec, kind_of
from campaign.playbook.planner_spec import CODE_PATH_ENV, KnobSpace, KnobSpec, PatchPolicy, PlannerSpec
from campaign.playbook.policy import BudgetSpec, CorrectnessSpec, LatencyLimit, RepeatsSpec, ReviewSpec, VerdictSpec
from campaign.playbook.server_spec import ConfigSpec, ServerSpec, SourceSpec, WorkloadConfig, no_shared_prompts

__all__ = [
    "CODE_PATH_ENV",
    "BudgetSpec",
    "ConfigSpec",
    "CorrectnessSpec",
    "HypothesisSpec",
    "KnobSpace",
    "KnobSpec",
    "LatencyLimit",
    "PatchPolicy",
    "PlannerSpec",
    "Playbook",
    "ProblemAt",
    "RepeatsSpec",
    "ReviewSpec",
    "Scalar",
    "ServerSpec",
    "SourceSpec",
    "VerdictSpec",
    "WorkloadConfig",
    "use_node_kinds",
]

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


# --------------------------------------------------------------------- hypotheses
class HypothesisSpec(Strict):
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

    _env_str = field_validator("env", mode="before")(lambda cls, v: env_values_to_str(v))

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


class Playbook(Strict):
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
        no_shared_prompts(v)
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
