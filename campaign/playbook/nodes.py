"""The playbook's node kinds: what every `node:` entry answers, and the registry its union is built from.

The core knows one kind of its own, the bundled simulated node (every playbook's default,
and what an ssh or Slurm node may host).  Every other kind is an adapter's: its spec model
lives next to its executor in `tools/executors/`, and the composition root hands the
executor registry's specs to `campaign.playbook.schema.use_node_kinds`, which rebuilds the
playbook's `node:` union from them.  The core thus validates a kind it cannot import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import CoreSchema

__all__ = ["NODE_SPECS", "NodeSpec", "NodeSpecBase", "SimulatedNodeSpec", "kind_of"]


class NodeSpecBase(BaseModel):
    """What every node kind answers, so that nothing outside the executor registry
    branches on `kind`: where the node's code and files live, and how it is named."""

    model_config = ConfigDict(extra="forbid")

    if TYPE_CHECKING:  # every kind declares both as fields: `kind` its Literal tag, `name` with its default
        kind: str
        name: str

    #: the node is another machine: its python and workdir are the spec's, the server binds 0.0.0.0
    remote: ClassVar[bool] = False

    def simulated_node(self) -> SimulatedNodeSpec | None:
        """The simulated node this spec runs (itself, or the one it hosts), None for a real engine."""
        return None

    def node_name(self) -> str:
        """The node's name in the record, the journal and messages (a kind may default it)."""
        return self.name or self.kind

    def node_time_scale(self) -> float:
        """Node seconds per wall second: the simulated node's clock, 1 for real hardware."""
        sim = self.simulated_node()
        return sim.time_scale if sim is not None else 1.0

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
        return f"{self.kind} {self.name}".strip()

    def where(self) -> str:
        """Where a launch's command runs, in words (`campaign plan`)."""
        return f"{kind_of(type(self))}: the command below runs on this machine"


class SimulatedNodeSpec(NodeSpecBase):
    """The bundled simulated GPU node, started locally."""

    kind: Literal["simulated"] = Field(default="simulated", description="the bundled simulated GPU node")
    name: str = Field(default="sim-0", description="the node's name in the record and the journal")
    profile: str = Field(
        default="rtx6000bw-pcie-8x",
        description=("the hardware the node models: rtx6000bw-pcie-8x or h200-nvlink-8x (tools/simnode/profiles.py)"),
    )
    cuda: str = Field(
        default="12.8",
        description="the CUDA version the node reports; `--set node.cuda=13.0` at a resume models an upgrade",
    )
    seed: int = Field(default=0, description="seeds the per-step noise (and seeded launch offsets)")
    time_scale: float = Field(default=1.0, gt=0, description="node seconds per wall second")
    noise_pct: float = Field(default=1.5, ge=0, le=20, description="per-step jitter (%), seeded")
    launch_offset_pct: float = Field(
        default=1.5,
        ge=0,
        le=20,
        description="each launch's speed offset (%, log-normal spread), drawn afresh per launch and shared "
        "by every level it serves, as on a real server; 0 turns it off",
    )
    launch_offsets: Literal["fresh", "seeded"] = Field(
        default="fresh",
        description="fresh: each launch draws its offset from OS entropy, as a real server lands; seeded: from "
        "`seed` and the launch's name (hypothesis, side, round), so a campaign replays the same offsets "
        "(a reproducible demo); the command template passes it as --launch-seed {launch_seed}",
    )

    def simulated_node(self) -> SimulatedNodeSpec | None:
        return self

    def describe(self) -> str:
        return f"simulated {self.profile} (CUDA {self.cuda})"

    def where(self) -> str:
        return "simulated: the simulated node's server runs on this machine"


def kind_of(spec: type[NodeSpecBase]) -> str:
    """The `kind` tag a spec model declares (its `kind: Literal[...]` field)."""
    field = spec.model_fields.get("kind")
    tags = get_args(field.annotation) if field is not None else ()
    if len(tags) != 1 or not isinstance(tags[0], str):
        raise TypeError(f"{spec.__name__}: a node spec declares `kind: Literal['<its kind>']`")
    return tags[0]


#: kind -> spec model, in the order the playbook's union (and its JSON Schema) lists them.
#: `campaign.playbook.schema.use_node_kinds` fills it from the composition root.
NODE_SPECS: dict[str, type[NodeSpecBase]] = {"simulated": SimulatedNodeSpec}


class _RegisteredKinds:
    """Pydantic hook: the node union is generated from `NODE_SPECS` each time the model
    holding it is (re)built, discriminated by `kind`."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        specs = tuple(NODE_SPECS.values())
        if len(specs) == 1:
            return handler.generate_schema(specs[0])
        return handler.generate_schema(Annotated[Union[specs], Field(discriminator="kind")])  # noqa: UP007


#: a `node:` entry: statically any node spec, validated as the registered kinds' union
NodeSpec = Annotated[NodeSpecBase, _RegisteredKinds()]
