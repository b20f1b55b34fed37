"""Playbook checks that need the adapters: what the engine profile would launch, and the
files a local node would run.  The core loader cannot make them (it imports no adapter);
the CLI runs them for `validate`, `run` and `resume`, before anything is recorded.

Each problem is one line `FILE:LINE: FIELD: what is wrong (fix: ...)`.
"""

from __future__ import annotations

import os
import shutil
import string
from pathlib import Path

from campaign.domain.config import merge
from campaign.domain.errors import UserError
from campaign.domain.models import EffectiveConfig
from campaign.playbook.load import line_at, prompt_file_problems
from campaign.playbook.schema import HypothesisSpec, Playbook
from tools.engines import engine_profile
from tools.engines.base import EngineProfile
from tools.engines.launch_spec import build_launch, launch_template


def _placeholders(template: str) -> dict[str, str]:
    """Every `{name}` of a command template filled with itself: two launches are compared
    by everything but the per-launch values (port, seed, worktree)."""
    names = {f for part in template.split() for _l, f, _s, _c in string.Formatter().parse(part) if f}
    return {n: f"<{n}>" for n in names if n != "flags"}


def launch_of(profile: EngineProfile, pb: Playbook, config: EffectiveConfig) -> tuple[list[str], dict[str, str]]:
    """The command line and environment the one launch builder renders for `config`
    (`${NAME}` references left as written)."""
    template = launch_template(profile, pb.server.command, pb.server.python)
    launch = build_launch(
        profile,
        config,
        model=pb.server.model,
        port="<port>",
        fill=_placeholders(template),
        command=pb.server.command,
        python=pb.server.python,
        expand_secrets=False,
    )
    return launch.argv, launch.env


def _why_same(h: HypothesisSpec, baseline: EffectiveConfig) -> str:
    """What the hypothesis writes that changes nothing, for the message."""
    parts = [f"{k}: false emits no flag" for k, v in h.flags.items() if v is False or v is None]
    parts += [
        f"{k}: {v!r} is already the baseline's"
        for k, v in h.flags.items()
        if v not in (False, None) and k.lstrip("-") in baseline.flags
    ]
    parts += [f"unset_flags {k} is not in the baseline" for k in h.unset_flags if k.lstrip("-") not in baseline.flags]
    parts += [f"env {k} is already the baseline's" for k in h.env if k in baseline.env]
    return "; ".join(parts) or "it changes nothing"


def identical_launches(pb: Playbook, source: str, at: tuple[str, ...] = ("hypotheses",)) -> list[str]:
    """A hypothesis whose launch is the baseline's would measure the baseline twice under
    another name (`enable-prefix-caching: false` for a flag the baseline does not set is
    left off the command line).  `at`: where the list of hypotheses is in `source`."""
    profile = engine_profile(pb.server.engine)
    baseline = merge(EffectiveConfig(), pb.baseline.flags, pb.baseline.env)
    base_launch = launch_of(profile, pb, baseline)
    lines = []
    for i, h in enumerate(pb.hypotheses):
        if h.patch or h.stack_patches:
            continue  # the code differs
        if launch_of(profile, pb, merge(baseline, h.flags, h.env, h.unset_flags)) != base_launch:
            continue
        off = next((k.lstrip("-") for k, v in h.flags.items() if v is False), None)
        fix = (
            f"to turn off a feature that is on by default, set its negative flag (e.g. no-{off}: true) if the "
            "engine has one"
            if off
            else "change a flag or env value the baseline does not already have"
        )
        lines.append(
            f"{source}:{line_at(source, *at, i, 'name')}: hypotheses[{i}] ({h.name}): launches "
            f"exactly the baseline's command and environment ({_why_same(h, baseline)}) (fix: {fix})"
        )
    return lines


def _runnable(python: str) -> bool:
    if "/" in python:
        path = Path(python)
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(python) is not None


def local_python(pb: Playbook, source: str) -> list[str]:
    """`server.python` on a node of this machine must exist; on an ssh or Slurm node it
    cannot be checked from here (see `remote_notes`)."""
    python = pb.server.python
    if python is None or any(spec.remote for spec in pb.all_nodes()) or _runnable(python):
        return []
    return [
        f"{source}:{line_at(source, 'server', 'python')}: server.python: {python} is not an executable on this "
        "machine (fix: give the path of the engine's interpreter, e.g. /path/to/venv/bin/python, or remove "
        "the line to use the controller's python)"
    ]


def remote_notes(pb: Playbook) -> list[str]:
    """What validate cannot check on a remote node, said rather than skipped."""
    remote = [spec.describe() for spec in pb.all_nodes() if spec.remote]
    if not remote:
        return []
    python = pb.server.python or "the node's python"
    return [
        f"not checked here: {python} on {', '.join(remote)} (it is looked for on the node: a missing interpreter "
        "fails the baseline's launch with the line of its log that says so)"
    ]


def adapter_problems(pb: Playbook, source: str) -> None:
    """Every problem at once, as one UserError (nothing when there is none)."""
    lines = prompt_file_problems(pb, source) + local_python(pb, source) + identical_launches(pb, source)
    if lines:
        raise UserError(*lines)
