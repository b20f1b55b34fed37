"""The fan-out over several nodes: `propose` picks a batch, `Send` starts one
experiment subgraph per hypothesis (apply -> measure* -> verdict -> record, the same
`Nodes` methods, with `node_index` and `current` in the branch's own state), and
`join` folds the branches' results into the campaign's counters.

A batch of one (a barrier, the last queued hypothesis, or the planner's proposal)
takes the sequential path (gate -> apply -> ... on the first node), unchanged.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from campaign.loop import routing
from campaign.loop.deps import Deps
from campaign.loop.nodes import Nodes
from campaign.loop.nodes.proposal import start_hypothesis
from campaign.loop.parallel import BranchOutput, BranchResult, ParallelState, merge_results, pick_batch
from campaign.loop.state import current_of


class FanOut:
    """The nodes the parallel graph adds or replaces."""

    def __init__(self, deps: Deps, nodes: Nodes) -> None:
        self.d, self.n = deps, nodes

    # --------------------------------------------------------------- propose
    def propose(self, state: ParallelState) -> dict[str, Any]:
        cid, store, pb = state["campaign_id"], self.d.store, self.d.playbook
        room = pb.budget.max_experiments - state.get("experiments_done", 0)
        done = {h.name for h in store.list_hypotheses(cid, status="done")}
        queued = [h.spec for h in store.list_hypotheses(cid, status="queued")]
        batch = pick_batch(queued, done=done, capacity=max(1, min(len(self.d.nodes), room)))
        if len(batch) < 2:
            return {**self.n.propose(state), "batch": []}
        return {"current": None, "batch": [start_hypothesis(self.d, cid, spec) for spec in batch]}

    # ---------------------------------------------------------- branch record
    def record_branch(self, state: ParallelState) -> dict[str, Any]:
        """The sequential `record` (finish, adopt, hypothesis done, events), reported to
        the join instead of updating counters that other branches update too."""
        cur, store = current_of(state), self.d.store
        update = self.n.record(
            {
                **state,
                "experiments_done": 0,
                "no_win_streak": 0,  # type: ignore[typeddict-unknown-key]
                "dead_end_streak": 0,
            }
        )
        v = store.get_verdict(cur["experiment_id"])
        if v is None:
            raise RuntimeError(f"graph: record ran before the verdict of {cur['experiment_id']}")
        result: BranchResult = {
            "hypothesis": cur["hypothesis"],
            "experiment_id": cur["experiment_id"],
            "node_index": state.get("node_index") or 0,
            "node": self.n._node(state).name,
            "kind": v.kind,
            "adopted_config": update.get("baseline_config"),
            "need_baseline": update.get("need_baseline"),
        }
        return {"results": [result], "current": None}

    # ------------------------------------------------------------------ join
    def join(self, state: ParallelState) -> dict[str, Any]:
        store = self.d.store
        cid = state["campaign_id"]
        results = state.get("results") or []
        counts = store.loop_tally(cid)
        summary = ", ".join(f"{r['hypothesis']} on {r['node']}: {r['kind']}" for r in results)
        store.add_event(
            cid,
            "batch",
            f"batch of {len(results)} finished: {summary}",
            key="batch:" + ",".join(sorted(r["experiment_id"] for r in results)),
        )
        return merge_results(
            state,
            results,
            self.d.playbook,
            hours_spent=counts.node_seconds / 3600,
            queue_hours=counts.queue_seconds / 3600,
        )

    # ---------------------------------------------------------------- wiring
    def after_propose(self, state: ParallelState) -> Any:
        batch = state.get("batch") or []
        if batch and not state.get("halt"):
            shared = {k: state.get(k) for k in ("campaign_id", "baseline_id", "baseline_config", "baseline_patches")}
            return [Send("experiment", {**shared, "current": cur, "node_index": i}) for i, cur in enumerate(batch)]
        return routing.after_propose(state)

    def experiment_graph(self) -> Any:
        """apply -> measure* -> verdict -> record on the branch's node (compiled; it
        checkpoints with the parent's checkpointer)."""
        g = StateGraph(ParallelState, output_schema=BranchOutput)
        for name in ("apply", "measure", "verdict"):
            g.add_node(name, getattr(self.n, name))
        g.add_node("record", self.record_branch)
        g.add_edge(START, "apply")
        g.add_edge("apply", "measure")
        max_rounds = self.d.playbook.verdict.repeats.max
        g.add_conditional_edges(
            "measure", partial(routing.after_measure, max_rounds=max_rounds), ["measure", "verdict"]
        )
        g.add_edge("verdict", "record")
        g.add_edge("record", END)
        return g.compile()

    def wire(self, g: StateGraph[Any], sequential_targets: list[str]) -> None:
        """Add the experiment subgraph and the join, and route `propose` to them (or,
        for a batch of one, where the sequential graph goes)."""
        g.add_node("experiment", self.experiment_graph())
        g.add_node("join", self.join)
        g.add_conditional_edges("propose", self.after_propose, ["experiment", *sequential_targets])
        g.add_edge("experiment", "join")
        g.add_edge("join", "render")
