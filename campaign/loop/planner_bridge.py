"""Between the graph and the planner: build its context from the record, record
every model call (never the key), and queue what it proposes.

The planner only ever returns validated `HypothesisSpec`s; commands are still built
from the playbook's template, so nothing a model writes reaches a shell.
"""

from __future__ import annotations

from typing import Any

from campaign.domain.errors import UserError
from campaign.playbook.schema import HypothesisSpec, Playbook


def make_llm_planner(pb: Playbook) -> Any | None:
    """The LLM planner, or None (with the notice recorded by the caller) when no endpoint is set."""
    from campaign.planner import select_planner

    planner, notice = select_planner(pb)
    return None if notice or planner.kind != "llm" else planner


def _context(deps: Any, cid: str):
    from campaign.planner import PlannerContext

    store = deps.store
    hyps = store.list_hypotheses(cid)
    view = store.view(cid)
    return PlannerContext(
        playbook=deps.playbook, view=view,
        tried=[h.name for h in hyps if h.status != "queued"],
        queue=[h.spec for h in hyps if h.status == "queued"],
        reopened=[d.hypothesis for d in view.dead_ends if d.reopened],
    )


def _record_calls(store: Any, cid: str, calls: list) -> None:
    for i, c in enumerate(calls):
        store.record_llm_call(cid, purpose=c.purpose, model=c.model, prompt_tokens=c.prompt_tokens,
                              completion_tokens=c.completion_tokens, latency_ms=c.latency_ms,
                              prompt_hash=c.prompt_hash, output=c.output_json,
                              rejection=c.rejection or c.error, attempt=i)


def propose_with_planner(deps: Any, cid: str) -> HypothesisSpec | None:
    """Ask the model for the next hypothesis once the playbook queue is empty."""
    from campaign.planner import PlannerUnavailable

    store = deps.store
    n_llm = sum(1 for h in store.list_hypotheses(cid) if h.source == "llm")
    if n_llm >= deps.playbook.planner.max_proposals:
        return None
    try:
        outcome = deps.planner.propose(_context(deps, cid))
    except PlannerUnavailable as exc:
        _record_calls(store, cid, exc.calls)
        store.add_event(cid, "planner", f"planner unavailable: {exc}")
        raise UserError(f"planner: {exc} (fix: check OPENAI_BASE_URL / OPENAI_API_KEY, "
                        f"or set planner.kind: queue)") from None
    _record_calls(store, cid, outcome.calls)
    for rej in outcome.rejections:
        store.add_event(cid, "planner", f"proposal rejected: {rej.reason}")
    if outcome.hypothesis is None:
        if outcome.note:
            store.add_event(cid, "planner", outcome.note)
        return None
    spec = outcome.hypothesis
    store.upsert_hypothesis(cid, spec, source="llm" if outcome.source == "llm" else "playbook")
    return spec


def analyze_with_planner(deps: Any, cid: str, experiment_id: str) -> None:
    """A short model-written analysis for the journal; never part of the verdict."""
    if not deps.playbook.planner.analyze:
        return
    view = deps.store.view(cid)
    exp = next((e for e in view.experiments if e.id == experiment_id), None)
    if exp is None or deps.store.get_artifact(experiment_id, "analysis") is not None:
        return
    outcome = deps.planner.analyze(_context(deps, cid), exp)
    _record_calls(deps.store, cid, outcome.calls)
    if outcome.text:
        deps.store.record_artifact(experiment_id, "analysis", outcome.text)
