"""Between the graph and the planner: build its context from the record, record
every model call (never the key), and queue what it proposes.

The planner only ever returns validated `HypothesisSpec`s; commands are still built
from the playbook's template, so nothing a model writes reaches a shell.  When the
planner stops (every proposal rejected, its budget spent, the endpoint unusable)
a "planner" event says so in one line, and `stop_reason` hands that line to the
node that finishes the campaign.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from campaign.domain.errors import UserError
from campaign.domain.measurement import Measurement
from campaign.domain.models import Failure
from campaign.domain.records import CALL_FAILED
from campaign.playbook.schema import HypothesisSpec, Playbook
from campaign.ports.store import LoopStore

if TYPE_CHECKING:
    from campaign.domain.records import CampaignView
    from campaign.loop.deps import Deps
    from campaign.planner import LlmCallRecord, PlannerContext

PLANNER_EVENT = "planner"
STOPPED = "planner stopped: "


def make_llm_planner(pb: Playbook) -> Any | None:
    """The LLM planner, or None (with the notice recorded by the caller) when no endpoint is set."""
    from campaign.planner import select_planner

    planner, notice = select_planner(pb)
    return None if notice or planner.kind != "llm" else planner


def _context(deps: Deps, cid: str, view: CampaignView | None = None) -> PlannerContext:
    """What the model is told; `view`: the campaign's view when the caller has read it."""
    from campaign.planner import PlannerContext

    store = deps.store
    hyps = store.list_hypotheses(cid)
    view = view or store.view(cid)
    return PlannerContext(
        playbook=deps.playbook,
        view=view,
        tried=[h.name for h in hyps if h.status != "queued"],
        queue=[h.spec for h in hyps if h.status == "queued"],
        reopened=[d.hypothesis for d in view.dead_ends if d.reopened],
    )


def _record_calls(store: LoopStore, cid: str, calls: list[LlmCallRecord]) -> None:
    """Every call, even one identical to an earlier call (same prompt): the attempt
    number continues from what is recorded, so nothing is dropped as a duplicate."""
    seen = Counter((c.purpose, c.prompt_hash) for c in store.planner_calls(cid))
    for c in calls:
        key = (c.purpose, c.prompt_hash)
        reason = c.rejection or (CALL_FAILED + c.error if c.error else None)
        store.record_llm_call(
            cid,
            purpose=c.purpose,
            model=c.model,
            prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens,
            latency_ms=c.latency_ms,
            prompt_hash=c.prompt_hash,
            output=c.output_json,
            rejection=reason,
            attempt=seen[key],
        )
        seen[key] += 1


def _note(store: LoopStore, cid: str, message: str) -> None:
    """A planner event; numbered keys, so the same message twice is two events."""
    n = len(store.events(cid, PLANNER_EVENT))
    store.add_event(cid, PLANNER_EVENT, message, key=f"{PLANNER_EVENT}#{n}")


def stop_reason(store: LoopStore, cid: str) -> str | None:
    """Why the planner stopped proposing, when its last event says it did."""
    events = store.events(cid, PLANNER_EVENT)
    last = events[-1].message if events else ""
    return last if last.startswith(STOPPED) else None


def _unavailable_error(message: str) -> UserError:
    """One line: the planner's own message, with a fix unless it already names one."""
    text = message if message.startswith("planner:") else f"planner: {message}"
    if "fix:" not in text:
        text += " (fix: check OPENAI_BASE_URL / OPENAI_API_KEY, or set planner.kind: queue)"
    return UserError(text)


def propose_with_planner(deps: Deps, cid: str) -> HypothesisSpec | None:
    """Ask the model for the next hypothesis once the playbook queue is empty."""
    from campaign.planner import PlannerUnavailable

    store, planner = deps.store, deps.planner
    if planner is None:  # `planner: queue`: nothing to ask
        return None
    spec_ = deps.playbook.planner
    n_llm = sum(1 for h in store.list_hypotheses(cid) if h.source == "llm")
    if n_llm >= spec_.max_proposals:
        if stop_reason(store, cid) is None:
            _note(store, cid, f"{STOPPED}planner.max_proposals ({spec_.max_proposals}) LLM hypotheses already run")
        return None
    try:
        outcome = planner.propose(_context(deps, cid))
    except PlannerUnavailable as exc:
        _record_calls(store, cid, exc.calls)
        _note(store, cid, f"planner unavailable: {exc}")
        raise _unavailable_error(str(exc)) from None
    _record_calls(store, cid, outcome.calls)
    if outcome.hypothesis is None:
        n = len(outcome.rejections)
        if n:
            last = outcome.rejections[-1].reason
            _note(store, cid, f"{STOPPED}{n} proposal{'s' if n != 1 else ''} rejected in a row (last: {last[:200]})")
        elif outcome.note:
            _note(store, cid, f"{STOPPED}{outcome.note}")
        return None
    spec: HypothesisSpec = outcome.hypothesis
    store.upsert_hypothesis(cid, spec, source="llm" if outcome.source == "llm" else "playbook")
    return spec


def analyze_with_planner(deps: Deps, cid: str, experiment_id: str) -> None:
    """A short model-written analysis for the journal; never part of the verdict."""
    if deps.planner is None or not deps.playbook.planner.analyze:
        return
    view = deps.store.view(cid)
    exp = next((e for e in view.experiments if e.id == experiment_id), None)
    if exp is None or deps.store.get_artifact(experiment_id, "analysis") is not None:
        return
    outcome = deps.planner.analyze(_context(deps, cid, view), exp)
    _record_calls(deps.store, cid, outcome.calls)
    if outcome.text:
        deps.store.record_artifact(experiment_id, "analysis", outcome.text)


def triage_with_planner(deps: Any, cid: str, failure: Failure, log_lines: list[str]) -> Failure:
    """The model's class for a failure no signature matched, kept as its suggestion: the
    class stays the rule table's (`exited`, so no verdict, dead end or revisit rule reads
    a guess), `suggested_class` and the summary say what the model thinks and that it is
    the model's.  A signature is never sent; without an LLM planner (planner.kind: queue,
    or no endpoint / key) nothing is asked and nothing is recorded."""
    if deps.planner is None or failure.matched or not log_lines:
        return failure
    outcome = deps.planner.triage(log_lines)
    _record_calls(deps.store, cid, outcome.calls)
    if outcome.failure_class is None:
        return failure
    cls = outcome.failure_class.value
    return failure.model_copy(
        update={
            "suggested_class": outcome.failure_class,
            "summary": f"{failure.summary}; the LLM suggests {cls} (a guess: no signature matched)",
        }
    )


def triage_measurement(deps: Any, cid: str, m: Measurement) -> Measurement:
    """`m`, its failure carrying the model's suggestion when no signature matched."""
    if m.failure is None or m.failure.matched:
        return m
    failure = triage_with_planner(deps, cid, m.failure, m.log_excerpt or m.failure.evidence)
    return m.model_copy(update={"failure": failure})
