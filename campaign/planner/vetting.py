"""Turn a model's proposal into a runnable hypothesis, or say why not (pure but for
the `git apply --check` of a patch).

A proposal is refused when its settings leave the knob space (`knobs.py`), when
its patch touches a forbidden path or does not apply (`patchcheck.py`), when it
repeats a recorded dead end whose revisit condition does not hold, or when it
duplicates a hypothesis already tried or queued.  "Same" means the same
effective change against the current baseline, whatever the name.
"""

from __future__ import annotations

from campaign.domain.models import EffectiveConfig
from campaign.domain.records import ExperimentView
from campaign.domain.source import normalized_patch_sha, patch_text
from campaign.planner.base import PlannerContext
from campaign.planner.knobs import (
    _NUMBER,
    HYPOTHESIS_NAME,
    Scalar,
    check_settings,
    shown,
    value_text,
)
from campaign.planner.patchcheck import patch_problems
from campaign.planner.schemas import Proposal
from campaign.playbook.schema import HypothesisSpec, KnobSpace

Change = frozenset[tuple[str, str, str]]
UNSET = "<unset>"


def _norm(value: Scalar) -> str:
    text = value_text(value)
    return repr(float(text)) if _NUMBER.match(text) else text


def patch_sha(patch: str) -> str:
    """Content identity of a patch (text or a playbook's patch file): the same
    normalized diff is the same idea whatever the hypothesis or file is called."""
    return normalized_patch_sha(patch_text(patch))


def baseline_config(ctx: PlannerContext) -> EffectiveConfig:
    if ctx.view.baseline is not None:
        return ctx.view.baseline.config
    return EffectiveConfig(flags=dict(ctx.playbook.baseline.flags), env=dict(ctx.playbook.baseline.env))


def effective_change(
    flags: dict[str, Scalar], env: dict[str, str], unset_flags: list[str], patch: str | None, base: EffectiveConfig
) -> Change:
    """The settings that actually differ from `base`, as a comparable set."""
    items: set[tuple[str, str, str]] = set()
    for key, value in flags.items():
        if key not in base.flags or _norm(base.flags[key]) != _norm(value):
            items.add(("flag", key, _norm(value)))
    for key, value in env.items():
        if key not in base.env or _norm(base.env[key]) != _norm(value):
            items.add(("env", key, _norm(value)))
    for key in unset_flags:
        if key in base.flags:
            items.add(("flag", key, UNSET))
    if patch:
        items.add(("patch", "", patch_sha(patch)))
    return frozenset(items)


def spec_change(h: HypothesisSpec, base: EffectiveConfig) -> Change:
    return effective_change(h.flags, h.env, h.unset_flags, h.patch, base)


def experiment_change(e: ExperimentView) -> Change:
    """The change an experiment measured, from its recorded config diff."""
    items: set[tuple[str, str, str]] = {
        (c.kind, c.key, UNSET if c.change == "removed" else _norm(c.after)) for c in e.config_diff
    }
    if e.patch is not None and e.patch.content:
        items.add(("patch", "", e.patch.content[-1]))
    return frozenset(items)


def _changes_of(name: str, ctx: PlannerContext, base: EffectiveConfig) -> list[Change]:
    """Every recorded form of hypothesis `name`: its spec and its experiments' diffs."""
    out = [experiment_change(e) for e in ctx.view.experiments if e.hypothesis == name]
    spec = ctx.playbook.hypothesis(name) or next((h for h in ctx.queue if h.name == name), None)
    if spec is not None:
        out.append(spec_change(spec, base))
    return [c for c in out if c]


def history_problems(p: Proposal, change: Change, ctx: PlannerContext) -> list[str]:
    """Dead ends and duplicates (pure)."""
    base = baseline_config(ctx)
    reopened = ctx.reopened_names()
    dead_names = {d.hypothesis for d in ctx.view.dead_ends}
    if p.revisit_of is not None and p.revisit_of not in reopened:
        state = "is not a recorded dead end" if p.revisit_of not in dead_names else "is a dead end that is not reopened"
        return [f"revisit_of {shown(p.revisit_of)} {state}"]
    for dead in ctx.view.dead_ends:
        if dead.hypothesis in reopened:
            continue
        if p.name == dead.hypothesis or change in _changes_of(dead.hypothesis, ctx, base):
            revisit = ", ".join(dead.revisit_on) or "nothing recorded"
            return [
                (
                    f"repeats dead end '{dead.hypothesis}' ({dead.reason}); it may be revisited only when "
                    f"one of these changes: {revisit}"
                )
            ]
    if p.name in ctx.known_names() and p.name not in reopened:
        return [f"duplicate: the name '{p.name}' is already tried or queued"]
    for name in sorted(ctx.known_names() - reopened - dead_names):
        if change in _changes_of(name, ctx, base):
            return [f"duplicate: the same change as '{name}', already tried or queued"]
    return []


def vet_proposal(
    p: Proposal, ctx: PlannerContext, knobs: KnobSpace, max_changes: int | None = None
) -> tuple[HypothesisSpec | None, list[str]]:
    """The runnable hypothesis, or None and every reason it was refused (`max_changes`: the
    most settings it may change, planner.max_changes)."""
    problems: list[str] = []
    if not HYPOTHESIS_NAME.match(p.name):
        problems.append(f"name {p.name!r} must be lowercase letters, digits, '.', '_' or '-' (at most 80)")
    settings, setting_problems = check_settings(p.flags, p.env, p.unset_flags, knobs, ctx.playbook.server.allowed_flags)
    problems += setting_problems
    changes = len(p.flags) + len(p.env) + len(p.unset_flags)
    if max_changes is not None and changes > max_changes:
        problems.append(f"changes {changes} settings; planner.max_changes allows {max_changes}")
    if p.patch is not None:
        problems += patch_problems(p.patch, knobs.patches, ctx.source)
    if problems:
        return None, problems
    change = effective_change(settings.flags, settings.env, settings.unset_flags, p.patch, baseline_config(ctx))
    if not change:
        return None, ["changes nothing relative to the current baseline"]
    problems = history_problems(p, change, ctx)
    if problems:
        return None, problems
    hypothesis = HypothesisSpec(
        name=p.name,
        rationale=p.rationale.strip(),
        flags=settings.flags,
        env=settings.env,
        unset_flags=settings.unset_flags,
        patch=p.patch,
    )
    return hypothesis, []
