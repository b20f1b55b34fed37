"""What confounds an experiment: a setting that differs between the two sides and that
the hypothesis does not declare.

Two sources, both checked:

* the requested configs (baseline vs candidate as the campaign launched them): an
  undeclared change is a confounder;
* what each side's server reports it runs (`ReportedConfig`, per round).  Only settings
  both servers report are compared, so what a server resolves the same way on both sides
  cancels out.  A reported difference is expected when the hypothesis declares the key,
  or when the engine profile says it follows from a flag that is declared or itself a
  listed difference (`derived_from`).  A declared flag the candidate's server reports at
  the baseline's value was ignored; one it reports at another value than requested was
  overridden; any other difference is undeclared.  Each of the three confounds the run.
  A request for `auto`, and a setting reported as an object's text (`opaque`), can only
  be checked for moving, not for its value.

A confounded run is INCONCLUSIVE (confounded) in `rule.decide`, and stops at
`repeats.min` (`gates.continue_rounds`): no number of repeats attributes its effect.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from campaign.domain.config import diff, flag_name, render_flags, undeclared
from campaign.domain.models import (
    ConfigChange,
    ConfigValue,
    EffectiveConfig,
    ReportedChange,
    ReportedConfig,
    ReportedStatus,
)

__all__ = ["ConfoundCheck", "check", "reported_changes"]

Kind = Literal["flag", "env"]
Change = Literal["added", "removed", "changed", "ignored", "overridden"]
_RANK = {"declared": 0, "follows": 1, "undeclared": 2, "overridden": 3, "ignored": 4}


class ConfoundCheck(BaseModel):
    """The confounders (what the verdict names) and the reported diff (what the record shows)."""

    confounded_by: list[ConfigChange] = Field(default_factory=list)
    reported_diff: list[ReportedChange] = Field(default_factory=list)


def _same(kind: str, key: str, a: ConfigValue, b: ConfigValue) -> bool:
    """Equal as the server sees them: 128 and "128" are one value, True and 1 are not."""
    if kind == "flag":
        return render_flags({key: a}) == render_flags({key: b})
    return str(a) == str(b)


def _negations(requested: Sequence[ConfigChange], reported: set[str]) -> list[ConfigChange]:
    """argparse's `--no-X` (BooleanOptionalAction, as vLLM spells its switches) sets X
    to False: the server reports X, so the request is read as X."""
    out = []
    for c in requested:
        key = flag_name(c.key) if c.kind == "flag" else c.key
        if c.kind == "flag" and key.startswith("no-") and key[3:] in reported and key not in reported:
            c = c.model_copy(update={"key": key[3:], "before": _negated(c.before), "after": _negated(c.after)})
        out.append(c)
    return out


def _negated(value: ConfigValue) -> ConfigValue:
    """The value X runs at when `--no-X` is `value` (a bare switch renders as True)."""
    return None if value is None else not (value is True or str(value).lower() in ("true", "1", ""))


def _is_auto(value: ConfigValue) -> bool:
    return isinstance(value, str) and value.strip().lower() == "auto"


def _pair_changes(
    base: ReportedConfig, cand: ReportedConfig, requested: Sequence[ConfigChange], declared: set[str]
) -> list[ReportedChange]:
    aliases = {flag_name(k): flag_name(v) for k, v in {**base.aliases, **cand.aliases}.items()}

    def canon(key: str) -> str:
        name = flag_name(key)
        return aliases.get(name, name)

    declared_keys = {("flag", canon(d)) for d in declared} | {("env", d) for d in declared}
    reported_keys = {canon(k) for k in (*base.flags, *cand.flags)}
    asked: dict[tuple[str, str], ConfigChange] = {
        (c.kind, canon(c.key) if c.kind == "flag" else c.key): c for c in _negations(requested, reported_keys)
    }
    declared_keys |= {
        ("flag", k[3:])
        for kind, k in declared_keys
        if kind == "flag" and k.startswith("no-") and k[3:] in reported_keys
    }
    derived = {canon(k): [canon(s) for s in v] for k, v in {**base.derived_from, **cand.derived_from}.items()}
    opaque = {canon(k) for k in (*base.opaque, *cand.opaque)}
    sides: dict[Kind, tuple[dict[str, ConfigValue], dict[str, ConfigValue]]] = {
        "flag": ({canon(k): v for k, v in base.flags.items()}, {canon(k): v for k, v in cand.flags.items()}),
        "env": (dict(base.env), dict(cand.env)),
    }
    moved: set[tuple[str, str]] = {
        (kind, k) for kind, (b, c) in sides.items() for k in b.keys() & c.keys() if not _same(kind, k, b[k], c[k])
    }
    moved |= set(asked)

    out: list[ReportedChange] = []
    for kind, (b, c) in sides.items():
        for key in sorted(b.keys() & c.keys()):
            before, after = b[key], c[key]
            same = _same(kind, key, before, after)
            ask = asked.get((kind, key))
            wanted = ask.after if ask is not None and ask.change in ("added", "changed") else None
            status: ReportedStatus | None = None
            sources: list[str] = []
            if (kind, key) in declared_keys and ask is not None and wanted is not None:
                # "auto" asks the server to resolve it, and an opaque report is not in the
                # request's spelling: either way only "did it move" can be checked
                loose = _is_auto(wanted) or (kind == "flag" and key in opaque)
                if same:  # asked for a new value, runs the baseline's: the flag did nothing
                    status = None if _is_auto(wanted) or _same(kind, key, wanted, before) else "ignored"
                else:
                    status = "declared" if loose or _same(kind, key, wanted, after) else "overridden"
            elif same:
                status = None
            elif (kind, key) in declared_keys:
                status = "declared"
            else:
                sources = [
                    s
                    for s in derived.get(key, [])
                    if s != key and (("flag", s) in declared_keys or ("flag", s) in moved)
                ]
                status = "follows" if sources else "undeclared"
            if status is not None:
                out.append(
                    ReportedChange(
                        kind=kind,
                        key=key,
                        baseline=before,
                        candidate=after,
                        requested=wanted,
                        status=status,
                        follows=sources,
                    )
                )
    return out


def reported_changes(
    pairs: Iterable[tuple[ReportedConfig, ReportedConfig]], requested: Sequence[ConfigChange], declared: set[str]
) -> list[ReportedChange]:
    """The reported diff over every round (baseline, candidate) that both servers
    reported; per setting, the most damning status any round showed."""
    by_key: dict[tuple[str, str], ReportedChange] = {}
    for base, cand in pairs:
        for ch in _pair_changes(base, cand, requested, declared):
            seen = by_key.get((ch.kind, ch.key))
            if seen is None or _RANK[ch.status] > _RANK[seen.status]:
                by_key[(ch.kind, ch.key)] = ch
    return sorted(by_key.values(), key=lambda c: (c.kind != "flag", c.key))


def _as_change(r: ReportedChange) -> ConfigChange:
    change: Change = "added" if r.baseline is None else "removed" if r.candidate is None else "changed"
    if r.status == "ignored" or r.status == "overridden":
        change = r.status
    return ConfigChange(
        kind=r.kind,
        key=r.key,
        before=r.baseline,
        after=r.candidate,
        change=change,
        reported=True,
        requested=r.requested,
    )


def check(
    baseline: EffectiveConfig,
    candidate: EffectiveConfig,
    declared: set[str],
    reported: Iterable[tuple[ReportedConfig, ReportedConfig]] = (),
) -> ConfoundCheck:
    """The confounders of one experiment: the requested configs' undeclared changes, then
    what the reported configs add (a setting already named from the request is named once)."""
    pairs = list(reported)
    requested = diff(baseline, candidate)
    confounders = undeclared(requested, declared)
    rows = reported_changes(pairs, requested, declared)
    named = {(c.kind, flag_name(c.key) if c.kind == "flag" else c.key) for c in confounders}
    aliases: dict[str, str] = {}
    for _base, cand in pairs:
        aliases.update({flag_name(k): flag_name(v) for k, v in cand.aliases.items()})
    named |= {("flag", aliases.get(k, k)) for kind, k in named if kind == "flag"}
    confounders += [_as_change(r) for r in rows if r.confounds and (r.kind, r.key) not in named]
    return ConfoundCheck(confounded_by=confounders, reported_diff=rows)
