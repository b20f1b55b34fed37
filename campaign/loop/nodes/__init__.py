"""The graph's nodes, one module per family: environment (fingerprint, baseline),
proposal (propose, gate, stack), experiment (apply, measure, verdict, record) and
review (render, review, finish).  `Nodes` gathers them for `build_graph`."""

from __future__ import annotations

from campaign.loop.deps import Deps
from campaign.loop.nodes.environment import EnvironmentNodes
from campaign.loop.nodes.experiment import ExperimentNodes
from campaign.loop.nodes.proposal import ProposalNodes
from campaign.loop.nodes.review import ReviewNodes

__all__ = ["NODE_NAMES", "Nodes"]

NODE_NAMES = (
    "fingerprint",
    "baseline",
    "propose",
    "gate",
    "apply",
    "measure",
    "verdict",
    "record",
    "render",
    "review",
    "stack",
    "finish",
)


class Nodes:
    """Every graph node as a bound method, by name (`getattr(nodes, name)`)."""

    def __init__(self, deps: Deps) -> None:
        env, prop, exp, rev = EnvironmentNodes(deps), ProposalNodes(deps), ExperimentNodes(deps), ReviewNodes(deps)
        self.d = deps
        self.fingerprint, self.baseline = env.fingerprint, env.baseline
        self.propose, self.gate, self.stack = prop.propose, prop.gate, prop.stack
        self.apply, self.measure, self.verdict, self.record = exp.apply, exp.measure, exp.verdict, exp.record
        self.render, self.review, self.finish = rev.render, rev.review, rev.finish
        self._node = env._node
