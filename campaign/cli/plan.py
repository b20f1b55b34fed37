"""`campaign plan PLAYBOOK`: what a run would start, before anything starts.

For the baseline and each hypothesis, on each node: the server's command line and
environment (secrets masked, `${NAME}` references shown as written), built by the same
function that builds a real launch (tools.engines.launch_spec via NodeRuntime.launch_spec),
so a plan cannot drift from a run; then the load each launch runs and how many launches
the verdict takes.  Nothing is started, no node is contacted, no database is opened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from campaign.cli.wiring import node_runtime_for
from campaign.domain.models import EffectiveConfig
from campaign.domain.request_count import requests_for_level
from campaign.loop.experiment import hypothesis_config, workloads_of
from campaign.playbook.nodes import NodeSpecBase
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.verdict.noise import NodeNoise, baseline_launches
from tools.engines.launch_spec import PORT_PLACEHOLDER
from tools.executors.registry import build_executor
from tools.node_runtime import NodeRuntime

WORKTREE = "<worktree>"
SEED = "<launch-seed>"


class PlannedLaunch(BaseModel):
    """One server as a run would start it."""

    name: str  # "baseline" or the hypothesis
    node: str
    command: str  # shell-quoted, secrets masked
    env: dict[str, str]  # on top of what the server inherits from the node
    inherits: list[str]  # node variables passed through (names or PREFIX*)
    source: str | None = None  # what `<worktree>` stands for


class PlannedWorkload(BaseModel):
    name: str
    concurrency: list[int]
    requests: dict[int, int]  # per concurrency level
    warmup_requests: int
    prompts: str
    prompt_tokens: int
    output_tokens: int


class Plan(BaseModel):
    playbook: str
    nodes: dict[str, str]  # node name -> where and how its commands run
    launches: list[PlannedLaunch]
    workloads: list[PlannedWorkload]
    repeats: dict[str, Any]
    correctness: str | None
    planner: str | None = None  # a model planner proposes more hypotheses while it runs


def make_plan(pb: Playbook, path: str) -> Plan:
    """The plan of `pb` (read from `path`)."""
    base = EffectiveConfig.model_validate({"flags": pb.baseline.flags, "env": pb.baseline.env})
    launches: list[PlannedLaunch] = []
    nodes: dict[str, str] = {}
    for spec in pb.all_nodes():
        node = node_runtime_for(pb, spec, workdir=Path(spec.node_workdir() or ".campaign/nodes"))
        nodes[node.name] = _where(spec)
        launches.append(_launch(pb, node, "baseline", base, None))
        launches += [_launch(pb, node, h.name, hypothesis_config(base, h), h) for h in pb.hypotheses]
    rep = pb.verdict.repeats
    return Plan(
        playbook=path,
        nodes=nodes,
        launches=launches,
        workloads=[
            PlannedWorkload(
                name=w.name,
                concurrency=list(w.concurrency),
                requests={c: requests_for_level(w.requests_per_level, c) for c in w.concurrency},
                warmup_requests=w.warmup_requests,
                prompts=w.prompts,
                prompt_tokens=w.prompt_tokens,
                output_tokens=w.output_tokens,
            )
            for w in workloads_of(pb)
        ],
        repeats={
            "baseline_launches": baseline_launches(rep, NodeNoise(), list(pb.workloads)),
            "min": rep.min,
            "max": rep.max,
            "policy": pb.verdict.policy,
            "interleave": pb.verdict.interleave,
        },
        correctness=(
            f"{pb.verdict.correctness.prompts} greedy prompts of {pb.verdict.correctness.max_tokens} tokens "
            f"on each side's first launch, compared"
            if pb.verdict.correctness.enabled
            else None
        ),
        planner=f"model {pb.planner.model} proposes hypotheses as it goes" if pb.planner.kind == "llm" else None,
    )


def _launch(
    pb: Playbook, node: NodeRuntime, name: str, config: EffectiveConfig, h: HypothesisSpec | None
) -> PlannedLaunch:
    src = pb.server.source
    patch = h.patch if h is not None else None
    source = None
    if src is not None:
        source = f"a worktree of {src.repo} at {src.ref}" + (f", with {patch} applied" if patch else "")
    spec = node.launch_spec(
        config,
        port=PORT_PLACEHOLDER,
        label=name,
        source=WORKTREE if source else None,
        expand_secrets=False,
        seed=SEED if node.seeded_launches() else None,
    )
    command, env = spec.shown()
    for placeholder in (PORT_PLACEHOLDER, WORKTREE, SEED):  # shlex quotes them: shown bare, as written
        command = command.replace(f"'{placeholder}'", placeholder)
    return PlannedLaunch(name=name, node=node.name, command=command, env=env, inherits=spec.base_env, source=source)


def _where(spec: NodeSpecBase) -> str:
    """Where a node's commands run, in words (the spec's own; for Slurm, the submit line
    that wraps them); a spec its executor refuses is refused here too."""
    build_executor(spec)  # (a remote simulated node's is wrapped in the runtime)
    return spec.where()


def render_plan(plan: Plan) -> list[str]:
    """The plan as lines for a terminal."""
    out = [f"plan for {plan.playbook} (nothing started; {PORT_PLACEHOLDER} is picked at each launch)"]
    for name, where in plan.nodes.items():
        out.append(f"node {name}: {where}")
    inherited: dict[str, list[str]] = {}
    for launch in plan.launches:
        out += ["", f"{launch.name} on {launch.node}:", f"  command: {launch.command}"]
        out.append("  env: " + (" ".join(f"{k}={v}" for k, v in launch.env.items()) or "(none)"))
        if inherited.get(launch.node) != launch.inherits:  # the same for every launch of a playbook
            out.append("  inherits from the node: " + " ".join(launch.inherits))
            inherited[launch.node] = launch.inherits
        if launch.source:
            out.append(f"  {WORKTREE}: {launch.source}")
    if plan.planner:
        out += ["", f"planner: {plan.planner}; each is launched as the baseline with its changes over it"]
    out += ["", "load, on every launch (baseline and hypotheses alike):"]
    for w in plan.workloads:
        reqs = ", ".join(f"C={c}: {n}" for c, n in w.requests.items())
        out.append(
            f"  {w.name}: concurrency {', '.join(map(str, w.concurrency))}; requests per level {reqs}; "
            f"{w.warmup_requests} warm-up; {w.prompts} prompts of {w.prompt_tokens} tokens, "
            f"{w.output_tokens} output tokens"
        )
    r = plan.repeats
    rounds = f"{r['min']}" if r["min"] == r["max"] else f"{r['min']} to {r['max']}"
    out.append(
        f"launches: the baseline {r['baseline_launches']} times at the start; each hypothesis {rounds} rounds "
        f"({r['policy']}{', each round beside a baseline launch' if r['interleave'] else ''})"
    )
    if plan.correctness:
        out.append(f"correctness: {plan.correctness}")
    return out
