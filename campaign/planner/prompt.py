"""The messages sent to the model, built from the journal's facts within a token budget.

Tokens are estimated as characters / 4.  When the facts do not fit
`planner.context_tokens`, the least important go first: the oldest scoreboard
rows, then queued names, the oldest dead ends (reopened ones last), environment
changes, baseline figures.  The instructions, the knob space and the rejection
feedback always stay.  Dropping a fact from the prompt never weakens validation:
dead ends and duplicates are checked against the full record.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from campaign.domain.errors import UserError
from campaign.domain.models import FailureClass
from campaign.domain.records import ExperimentView
from campaign.planner.base import PlannerContext
from campaign.planner.schemas import ANALYSIS_MAX_WORDS, Rejection
from campaign.playbook.schema import KnobSpace, KnobSpec

Messages = list[dict[str, str]]
#: rejection feedback: the newest few answers and reasons, each cut short
FEEDBACK_MAX = 3
FEEDBACK_CHARS = 600

PROPOSE_SYSTEM = (
    "You plan the next experiment of an inference-server optimization campaign. "
    "Answer with one JSON object only: name, rationale, expected_effect, flags, env, unset_flags, "
    "patch, revisit_of. Use only the flags and env vars of the knob space, with their types and ranges; "
    "values are plain scalars (no spaces, quotes or shell characters). Do not repeat a dead end unless it "
    "is marked REOPENED (then set revisit_of to its name). Do not duplicate a tried or queued hypothesis. "
    "A patch (unified diff) is only allowed on the listed paths and needs human approval."
)
ANALYZE_SYSTEM = (
    "You comment on one finished experiment of an inference-server optimization campaign. "
    f'Answer with JSON {{"analysis": "..."}}: one paragraph, at most {ANALYSIS_MAX_WORDS} words, '
    "plain text. The verdict is already decided by statistics; explain it, do not change it."
)
TRIAGE_SYSTEM = (
    "Classify why an inference server process failed, from its log. "
    'Answer with JSON {"failure_class": "<one of the listed classes or unknown>"}.'
)


def estimate_tokens(messages: Messages) -> int:
    return sum(len(m["content"]) for m in messages) // 4 + 4 * len(messages)


def _knob_line(name: str, spec: KnobSpec) -> str:
    if spec.type == "choice":
        return f"- {name}: one of {json.dumps(spec.choices)}"
    if spec.type in ("int", "float"):
        lo = "-inf" if spec.min is None else f"{spec.min:g}"
        hi = "inf" if spec.max is None else f"{spec.max:g}"
        return f"- {name}: {spec.type} in [{lo}, {hi}]"
    return f"- {name}: {spec.type}"


def knob_lines(knobs: KnobSpace) -> list[str]:
    lines = ["Flags (rendered --name value):"] + [_knob_line(n, s) for n, s in knobs.flags.items()]
    lines += ["Env vars:"] + [_knob_line(n, s) for n, s in knobs.env.items()]
    if knobs.patches is not None:
        lines.append(f"Patches allowed on: {', '.join(knobs.patches.allowed_paths)} (need approval)")
    else:
        lines.append("Patches: not allowed (patch must be null)")
    return lines


def _fit(
    render: Callable[[dict[str, list[str]]], Messages],
    parts: dict[str, list[str]],
    drop_order: list[tuple[str, int]],
    budget: int,
) -> Messages:
    """Drop entries from the front (oldest) of each list until the messages fit.

    `drop_order` is a list of (section, entries to keep) phases: the least important
    sections are cut down to a few newest entries first, then the next, and only
    then emptied, so the model still sees a little of everything."""
    dropped = {k: 0 for k in parts}
    while True:
        shown = {k: (v + [f"({dropped[k]} older entries omitted)"] if dropped.get(k) else v) for k, v in parts.items()}
        messages = render(shown)
        if estimate_tokens(messages) <= budget:
            return messages
        key = next((k for k, keep in drop_order if len(parts[k]) > keep), None)
        if key is None:
            raise UserError(
                f"playbook: planner.context_tokens: {budget} is too small for the instructions and knob space "
                f"(need about {estimate_tokens(messages)}; fix: raise planner.context_tokens)"
            )
        parts[key] = parts[key][1:]
        dropped[key] += 1


def _section(title: str, lines: list[str]) -> str:
    return f"## {title}\n" + ("\n".join(lines) if lines else "(none)")


def _fact_parts(ctx: PlannerContext) -> dict[str, list[str]]:
    view = ctx.view
    reopened = ctx.reopened_names()
    figures: list[str] = []
    base_cfg: list[str] = []
    if view.baseline is not None:
        base_cfg = [f"flags: {json.dumps(view.baseline.config.flags)}", f"env: {json.dumps(view.baseline.config.env)}"]
        for wl, levels in view.baseline.figures.items():
            figures += [f"- {wl} C={c}: {v:.1f}" for c, v in sorted(levels.items())]
    else:
        base_cfg = [
            f"flags: {json.dumps(ctx.playbook.baseline.flags)}",
            f"env: {json.dumps(ctx.playbook.baseline.env)}",
        ]
    env_lines: list[str] = []
    if view.environment is not None:
        fp = view.environment.model_dump(exclude_defaults=True)
        env_lines.append(json.dumps(fp, sort_keys=True))
    # oldest first, so that trimming from the front drops the oldest
    dead = sorted(view.dead_ends, key=lambda d: d.hypothesis in reopened)
    dead_lines = [
        f"- {d.hypothesis}: {d.reason}"
        + (f" [{d.failure_class.value}]" if d.failure_class else "")
        + f"; revisit when: {', '.join(d.revisit_on) or 'never'}"
        + (" REOPENED" if d.hypothesis in reopened else "")
        for d in dead
    ]
    score = []
    for e in view.experiments:
        v = e.verdict
        delta = f", {v.headline_delta_pct:+.1f}%" if v and v.headline_delta_pct is not None else ""
        outcome = f"{v.kind}{delta}: {v.reason}" if v else (e.failure.summary if e.failure else e.status)
        score.append(f"- {e.hypothesis} [{e.source}]: {outcome}")
    return {
        "changes": [f"- {c}" for c in view.environment_changes],
        "figures": figures,
        "dead": dead_lines,
        "score": score,
        "queue": [f"- {h.name}" for h in ctx.queue],
        "fixed_base": base_cfg,
        "fixed_env": env_lines,
    }


def proposal_messages(ctx: PlannerContext, knobs: KnobSpace, rejections: list[Rejection], budget: int) -> Messages:
    """System + user messages for `propose`, with the rejection feedback at the end."""
    pb = ctx.playbook
    header = f"Campaign '{pb.name}': {pb.description}".strip() + f"\nMetric: {pb.verdict.metric} (higher is better)."
    knob_text = _section("Knob space", knob_lines(knobs))

    def render(p: dict[str, list[str]]) -> Messages:
        user = "\n\n".join(
            [
                header,
                knob_text,
                _section("Current baseline", p["fixed_base"] + p["figures"]),
                _section("Environment", p["fixed_env"] + p["changes"]),
                _section("Dead ends (oldest first)", p["dead"]),
                _section("Scoreboard (oldest first)", p["score"]),
                _section("Queued (do not duplicate)", p["queue"]),
                "Propose the next hypothesis as JSON.",
            ]
        )
        messages = [{"role": "system", "content": PROPOSE_SYSTEM}, {"role": "user", "content": user}]
        shown = [rejections[int(i)] for i in p["rejected"] if i.isdigit()]
        if len(shown) < len(rejections):
            messages.append(
                {
                    "role": "user",
                    "content": f"{len(rejections) - len(shown)} earlier proposals were "
                    "rejected too; do not repeat them.",
                }
            )
        for r in shown:
            messages.append({"role": "assistant", "content": r.raw[:FEEDBACK_CHARS]})
            messages.append(
                {
                    "role": "user",
                    "content": f"Rejected: {r.reason[:FEEDBACK_CHARS]}. Propose a different, valid hypothesis.",
                }
            )
        return messages

    parts = _fact_parts(ctx)
    # the newest rejections only: a long run of long bad answers must not outgrow the budget
    parts["rejected"] = [str(i) for i in range(len(rejections))][-FEEDBACK_MAX:]
    return _fit(
        render,
        parts,
        [
            ("rejected", 1),
            ("score", 8),
            ("queue", 8),
            ("dead", 8),
            ("changes", 2),
            ("figures", 4),
            ("score", 0),
            ("queue", 0),
            ("dead", 0),
            ("changes", 0),
            ("figures", 0),
        ],
        budget,
    )


def analysis_messages(ctx: PlannerContext, experiment: ExperimentView, budget: int) -> Messages:
    e = experiment
    facts = [f"Hypothesis: {e.hypothesis} ({e.source}). Rationale: {e.rationale}"]
    facts += [f"Change: {c.kind} {c.key}: {c.before!r} -> {c.after!r}" for c in e.config_diff]
    if e.verdict is not None:
        facts.append(f"Verdict: {e.verdict.kind} ({e.verdict.reason})")
    if e.failure is not None:
        facts.append(f"Failure: {e.failure.failure_class.value}: {e.failure.summary}")
    levels = [
        f"- {c.workload} C={c.concurrency}: {c.delta_pct:+.1f}% [{c.ci_low_pct:+.1f}, {c.ci_high_pct:+.1f}] {c.winner}"
        for c in (e.verdict.levels if e.verdict else [])
    ]

    def render(p: dict[str, list[str]]) -> Messages:
        user = "\n".join(facts) + "\n" + _section("Levels (delta vs baseline, CI)", p["levels"])
        return [{"role": "system", "content": ANALYZE_SYSTEM}, {"role": "user", "content": user}]

    return _fit(render, {"levels": levels}, [("levels", 0)], budget)


def triage_messages(log_lines: list[str], budget: int) -> Messages:
    classes = ", ".join(c.value for c in FailureClass)

    def render(p: dict[str, list[str]]) -> Messages:
        user = f"Classes: {classes}\n" + _section("Log (last lines)", p["log"])
        return [{"role": "system", "content": TRIAGE_SYSTEM}, {"role": "user", "content": user}]

    return _fit(render, {"log": [ln.rstrip("\n")[:400] for ln in log_lines[-400:]]}, [("log", 0)], budget)
