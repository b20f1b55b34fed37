"""Load a playbook YAML into a validated `Playbook`, or explain every problem.

Each problem is one line: `FILE:LINE: FIELD: what is wrong (fix: ...)`.  Line
numbers come from the YAML node tree so the user lands on the right line, and a
misspelled key gets a did-you-mean from the model's known fields.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from campaign.domain.errors import UserError
from campaign.playbook.nodes import NODE_SPECS, SimulatedNodeSpec
from campaign.playbook.schema import Playbook


class PlaybookError(UserError):
    """A playbook that does not validate: one line per problem."""


def _node_at(root: yaml.Node | None, loc: tuple[Any, ...]) -> yaml.Node | None:
    """The deepest YAML node along a pydantic error location."""
    node = root
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if getattr(k, "value", None) == str(part)), None)
            if nxt is None:
                key = next((k for k, _ in node.value if getattr(k, "value", None) == str(part)), None)
                return key or node
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return node
    return node


def _key_node(root: yaml.Node | None, loc: tuple[Any, ...]) -> yaml.Node | None:
    if not loc:
        return root
    parent = _node_at(root, loc[:-1])
    if isinstance(parent, yaml.MappingNode):
        for k, _ in parent.value:
            if getattr(k, "value", None) == str(loc[-1]):
                return k
    return _node_at(root, loc)


def _model_for(loc: tuple[Any, ...], data: Any) -> type[BaseModel] | None:
    """The pydantic model that owns the field at `loc` (to suggest known names)."""
    from campaign.playbook import schema as pb

    model: type[BaseModel] | None = Playbook
    cursor: Any = data
    for part in loc[:-1]:
        if model is None:
            return None
        if isinstance(part, int):
            cursor = cursor[part] if isinstance(cursor, list) and part < len(cursor) else None
            continue
        field = model.model_fields.get(str(part))
        cursor = cursor.get(part) if isinstance(cursor, dict) else None
        if field is None:
            # a dict of models (workloads: {name: WorkloadConfig}) or a union member tag
            if model is Playbook:
                return None
            continue
        ann = field.annotation
        name = str(part)
        model = {
            "node": None,
            "server": pb.ServerSpec,
            "baseline": pb.ConfigSpec,
            "verdict": pb.VerdictSpec,
            "review": pb.ReviewSpec,
            "budget": pb.BudgetSpec,
            "planner": pb.PlannerSpec,
            "knobs": pb.KnobSpace,
            "hypotheses": pb.HypothesisSpec,
            "workloads": pb.WorkloadConfig,
            "repeats": pb.RepeatsSpec,
            "latency_limit": pb.LatencyLimit,
            "correctness": pb.CorrectnessSpec,
            "patches": pb.PatchPolicy,
            "source": pb.SourceSpec,
        }.get(name, ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None)
        if name == "node" and isinstance(cursor, dict):
            model = NODE_SPECS.get(str(cursor.get("kind", "simulated")))
        if name == "workloads" and isinstance(cursor, dict):
            # skip the workload-name level
            pass
    return model


def _fix_for(err: dict[str, Any], loc: tuple[Any, ...], data: Any) -> str:
    kind = err["type"]
    field = str(loc[-1]) if loc else ""
    if kind == "extra_forbidden":
        model = _model_for(loc, data)
        if model is None and len(loc) >= 2 and loc[0] == "workloads":
            from campaign.playbook.schema import WorkloadConfig

            model = WorkloadConfig
        if model is None and loc and loc[0] == "node":
            model = SimulatedNodeSpec
        known = sorted(model.model_fields) if model else []
        close = difflib.get_close_matches(field, known, n=1, cutoff=0.6)
        if close:
            return f"unknown field '{field}' (fix: did you mean '{close[0]}'?)"
        return (
            f"unknown field '{field}' (fix: remove it; known fields: {', '.join(known)})"
            if known
            else f"unknown field '{field}' (fix: remove it)"
        )
    if kind == "missing":
        return f"required field '{field}' is missing (fix: add it)"
    got = err.get("input")
    got_s = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
    msg = str(err["msg"]).replace("Value error, ", "")
    if "(fix:" in msg:  # the validator already names the value and the fix
        return msg
    return f"{msg}, got {got_s} (fix: {_hint(kind, err)})"


def _hint(kind: str, err: dict[str, Any]) -> str:
    ctx = err.get("ctx") or {}
    if kind.startswith("int"):
        return "use a whole number"
    if kind.startswith("float"):
        return "use a number"
    if kind.startswith("bool"):
        return "use true or false"
    if kind in ("literal_error", "enum"):
        return f"use one of {ctx.get('expected', 'the allowed values')}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return "use a value in range"
    if kind == "union_tag_invalid":
        return f"use one of {ctx.get('expected_tags', ', '.join(NODE_SPECS))}"
    if kind in ("dict_type", "model_type"):
        return "use a mapping of key: value"
    if kind == "list_type":
        return "use a list"
    if kind == "string_type":
        return "use a string (quote it)"
    return "see the playbook reference, docs/reference/playbook.md"


def _fmt_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in NODE_SPECS and out == "node":
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _printable(text: str) -> str:
    """One terminal line: control characters and line separators (from a YAML key
    such as "a\\nb") are shown escaped instead of breaking the message."""
    return "".join(ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _problems(*lines: str) -> PlaybookError:
    return PlaybookError(*(_printable(ln) for ln in dict.fromkeys(lines)))


def _cross_check_lines(root: yaml.Node | None, data: dict[str, Any], source: str) -> list[str]:
    """Duplicate hypothesis names and flags outside `server.allowed_flags`, located at
    the offending line (the model's own check only knows the top level)."""
    hyps = data.get("hypotheses")
    if not isinstance(hyps, list):
        return []
    server = data.get("server")
    allowed = server.get("allowed_flags") if isinstance(server, dict) else None
    allowed = [str(a) for a in allowed] if isinstance(allowed, list) else None
    lines: list[str] = []
    first: dict[str, int] = {}
    for i, h in enumerate(hyps):
        if not isinstance(h, dict):
            continue
        name = h.get("name")
        if isinstance(name, str):
            line = _line((i, "name"), root)
            if name in first:
                lines.append(
                    f"{source}:{line}: hypotheses[{i}].name: duplicate hypothesis name '{name}' (first at "
                    f"line {first[name]}) (fix: give each hypothesis a unique name)"
                )
            first.setdefault(name, line)
        if allowed is None:
            continue
        raw_flags, raw_unset = h.get("flags"), h.get("unset_flags")
        flags: dict[str, Any] = raw_flags if isinstance(raw_flags, dict) else {}
        unset: list[Any] = raw_unset if isinstance(raw_unset, list) else []
        for where, flag, loc in [("flags", f, (i, "flags", f)) for f in flags] + [
            ("unset_flags", f, (i, "unset_flags", k)) for k, f in enumerate(unset)
        ]:
            if str(flag) in allowed:
                continue
            close = difflib.get_close_matches(str(flag), allowed, n=1, cutoff=0.6)
            fix = (
                f"did you mean '{close[0]}'?"
                if close
                else "remove it, or add it to server.allowed_flags if the server template takes it"
            )
            lines.append(
                f"{source}:{_line(loc, root, key=where == 'flags')}: hypotheses[{i}].{where}.{flag}: "
                f"flag '{flag}' is not in server.allowed_flags {allowed} (fix: {fix})"
            )
    return lines


def _secret_literal_lines(root: yaml.Node | None, data: dict[str, Any], source: str) -> list[str]:
    """A secret written into the playbook would be copied into the record, the checkpoints,
    the journal and (as a flag) a command line: an env var with a secret name or a
    token-shaped value, a flag with a secret name or a token-shaped value.  Only
    `${NAME}` references in env are accepted."""
    from campaign.domain.redact import ENV_REF, SECRET_FLAG, is_secret_name, token_shape

    configs: list[tuple[Any, ...]] = [("baseline",)] if isinstance(data.get("baseline"), dict) else []
    if isinstance(data.get("hypotheses"), list):
        configs += [("hypotheses", i) for i, h in enumerate(data["hypotheses"]) if isinstance(h, dict)]
    lines = []
    for at in configs:
        config = data["baseline"] if at[0] == "baseline" else data["hypotheses"][at[1]]
        for where in ("env", "flags"):
            values = config.get(where)
            for name, value in values.items() if isinstance(values, dict) else ():
                text = str(value)
                if where == "env":
                    bad = not ENV_REF.match(text) and (is_secret_name(str(name)) or token_shape(text))
                    fix = f"write {name}: ${{{name}}} and export {name} in the controller's environment"
                else:
                    bad = (SECRET_FLAG.match(f"--{name}") is not None and value is not True) or token_shape(text)
                    fix = (
                        "remove the flag and give the secret by environment, env: {VAR: ${VAR}} with the "
                        "variable the engine reads, which never reaches a command line or a record"
                    )
                if bad:
                    node = _key_node(root, (*at, where, name))
                    line = node.start_mark.line + 1 if node is not None else 1
                    lines.append(
                        f"{source}:{line}: {_fmt_loc((*at, where, name))}: a secret written into the "
                        f"playbook would be recorded (fix: {fix})"
                    )
    return lines


def _reference_lines(root: yaml.Node | None, data: dict[str, Any], source: str) -> list[str]:
    """`depends_on` naming no hypothesis of the playbook: the hypothesis would wait for a
    result that never comes."""
    hyps = data.get("hypotheses")
    if not isinstance(hyps, list):
        return []
    names = [str(h.get("name")) for h in hyps if isinstance(h, dict)]
    lines = []
    for i, h in enumerate(hyps):
        deps = h.get("depends_on") if isinstance(h, dict) else None
        for k, dep in enumerate(deps if isinstance(deps, list) else []):
            if str(dep) not in names:
                close = difflib.get_close_matches(str(dep), names, n=1, cutoff=0.6)
                fix = f"did you mean '{close[0]}'?" if close else "name a hypothesis of this playbook, or remove it"
                lines.append(
                    f"{source}:{_line((i, 'depends_on', k), root)}: hypotheses[{i}].depends_on[{k}]: "
                    f"no hypothesis is named '{dep}' (fix: {fix})"
                )
    return lines


def _line(loc: tuple[Any, ...], root: yaml.Node | None, *, key: bool = False) -> int:
    hyp_root = _node_at(root, ("hypotheses",))
    node = _key_node(hyp_root, loc) if key else _node_at(hyp_root, loc)
    return node.start_mark.line + 1 if node is not None else 1


def _misspelled(kind: str, loc: tuple[Any, ...], found: list[tuple[str, tuple[Any, ...], str]]) -> bool:
    """A missing required field that an unknown sibling key already suggests: one
    misspelling is reported once (as the did-you-mean), not twice."""
    if kind != "missing" or not loc:
        return False
    hint = f"did you mean '{loc[-1]}'?"
    return any(k == "extra_forbidden" and other[:-1] == loc[:-1] and hint in ln for k, other, ln in found)


#: location parts pydantic adds for validators (not keys the user wrote).
_VALIDATOR_LOC = re.compile(r"^function-(after|before|wrap|plain)\[")

_CROSS_CHECK_MESSAGES = ("duplicate hypothesis name", "server.allowed_flags does not list")


def parse_playbook_text(text: str, source: str = "<playbook>") -> Playbook:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _problems(f"{where}: malformed YAML: {problem} (fix: check indentation and quoting)") from None
    if not isinstance(data, dict):
        raise _problems(
            f"{source}:1: a playbook is a mapping with name, workloads, hypotheses... "
            "(fix: see playbooks/eagle_verify.yaml)"
        )
    cross = (
        _cross_check_lines(root, data, source)
        + _secret_literal_lines(root, data, source)
        + _reference_lines(root, data, source)
    )
    try:
        pb = Playbook.model_validate(data)
    except ValidationError as exc:
        found: list[tuple[str, tuple[Any, ...], str]] = []  # (kind, loc, line)
        for err in exc.errors():
            if cross and not err["loc"] and any(m in err["msg"] for m in _CROSS_CHECK_MESSAGES):
                continue  # already located by _cross_check_lines
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and _VALIDATOR_LOC.match(p)))
            loc = tuple(p for p in loc if p not in NODE_SPECS or loc.index(p) != 1)
            at = tuple(getattr((err.get("ctx") or {}).get("error"), "at", ()))  # schema.ProblemAt
            loc += at
            node = _key_node(root, loc) if err["type"] == "extra_forbidden" or at else _node_at(root, loc)
            line = (node.start_mark.line + 1) if node is not None else 1
            found.append((err["type"], loc, f"{source}:{line}: {_fmt_loc(loc)}: {_fix_for(dict(err), loc, data)}"))
        raise _problems(*cross, *[ln for kind, loc, ln in found if not _misspelled(kind, loc, found)]) from None
    if cross:
        raise _problems(*cross)
    source_lines = _source_lines(root, pb, source)
    if source_lines:
        raise _problems(*source_lines)
    return pb


def _source_lines(root: yaml.Node | None, pb: Playbook, source: str) -> list[str]:
    """A patch needs a source tree to be applied to, and a source tree is only used when
    the command runs from `{source}`: either gap would measure unpatched code under a
    patch's name."""
    lines = []
    uses = "{source}" in (pb.server.command or "")
    server_node = _node_at(root, ("server",))
    server_line = server_node.start_mark.line + 1 if server_node is not None else 1
    if pb.server.source is None:
        for i, h in enumerate(pb.hypotheses):
            if h.patch:
                lines.append(
                    f"{source}:{_line((i, 'patch'), root)}: hypotheses[{i}].patch: a patch needs "
                    "server.source (fix: add server: {source: {repo: PATH, ref: BRANCH}} and run the "
                    "command from {source})"
                )
        if uses:
            lines.append(
                f"{source}:{server_line}: server.command: uses {{source}} but server.source is not set "
                "(fix: add server.source: {repo: PATH, ref: BRANCH})"
            )
    elif not uses:
        lines.append(
            f"{source}:{server_line}: server.command: does not use {{source}}, so the server would not "
            "run from the patched tree (fix: start it from {source}, e.g. env PYTHONPATH={source} ...)"
        )
    return lines


def load_playbook(path: str | Path) -> Playbook:
    p = Path(path)
    if not p.is_file():
        raise PlaybookError(f"{p}: no such playbook file (fix: check the path; examples are in playbooks/)")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlaybookError(
            f"{p}: cannot read: {exc.__class__.__name__} (fix: check permissions and encoding)"
        ) from None
    base = p.parent
    _check_patch_files(text, p)  # first: a missing file is the more specific problem
    pb = parse_playbook_text(text, str(p))
    # a patch found next to the playbook is read from there at launch time
    hyps = [
        h.model_copy(update={"patch": str(base / h.patch)}) if h.patch and not Path(h.patch).is_file() else h
        for h in pb.hypotheses
    ]
    return pb.model_copy(update={"hypotheses": hyps})


def _check_patch_files(text: str, p: Path) -> None:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return  # parse_playbook_text says why
    from campaign.domain.source import normalized_patch_sha

    hyps = data.get("hypotheses") if isinstance(data, dict) else None
    seen: dict[str, str] = {}
    for h in hyps if isinstance(hyps, list) else []:
        patch = h.get("patch") if isinstance(h, dict) else None
        if not (isinstance(patch, str) and patch):
            continue
        found = next((f for f in (Path(patch), p.parent / patch) if f.is_file()), None)
        line = _line_of(text, f"patch: {patch}")
        if found is None:
            raise PlaybookError(
                f"{p}:{line}: hypotheses.{h.get('name')}.patch: patch file '{patch}' not found "
                "(fix: give a path relative to the working directory or the playbook)"
            )
        key = normalized_patch_sha(found.read_text(encoding="utf-8", errors="replace"))
        if key in seen:  # the same change under another name would be measured twice
            raise PlaybookError(
                f"{p}:{line}: hypotheses.{h.get('name')}.patch: the same diff as hypothesis "
                f"'{seen[key]}' (fix: remove one of them)"
            )
        seen[key] = str(h.get("name"))


def prompt_file_problems(pb: Playbook, path: str | Path) -> list[str]:
    """A prompts file is read from the working directory when the first sweep starts: a
    missing or malformed one is refused before a server is launched for nothing (by the
    commands that launch; a journal of a finished campaign does not need the file)."""
    p = Path(path)
    from campaign.domain.prompts import load_jsonl

    lines = []
    for name, wl in pb.workloads.items():
        if wl.prompts in ("fixed", "diverse"):
            continue
        at = f"{p}:{line_at(p, 'workloads', name, 'prompts')}: workloads.{name}.prompts"
        if not Path(wl.prompts).is_file():
            beside = p.parent / wl.prompts
            fix = (
                f"it is read from the working directory: write {beside}"
                if beside.is_file()
                else 'give a JSONL file of {"prompt": ...} lines, relative to the working directory, '
                "or use fixed or diverse"
            )
            lines.append(f"{at}: prompts file '{wl.prompts}' not found (fix: {fix})")
            continue
        try:
            load_jsonl(wl.prompts)
        except UserError as exc:
            lines.append(f"{at}: {exc.lines[0]}")
    return [_printable(ln) for ln in lines]


def _line_of(text: str, needle: str) -> int:
    for i, ln in enumerate(text.splitlines(), 1):
        if needle in ln:
            return i
    return 1


def apply_overrides(pb: Playbook, overrides: dict[str, str]) -> Playbook:
    """Apply `--set a.b=value` overrides (recorded by resume) and re-validate."""
    data = pb.model_dump(mode="json")
    for dotted, raw in overrides.items():
        cur: Any = data
        parts = dotted.split(".")
        for part in parts[:-1]:
            if not isinstance(cur, dict) or part not in cur:
                raise UserError(
                    f"--set {dotted}: no field '{part}' in the playbook (fix: use a dotted path like node.cuda)"
                )
            cur = cur[part]
        if not isinstance(cur, dict) or parts[-1] not in cur:
            raise UserError(f"--set {dotted}: no field '{parts[-1]}' (fix: use an existing field, e.g. node.cuda=13.0)")
        cur[parts[-1]] = yaml.safe_load(raw) if not isinstance(cur[parts[-1]], str) else raw
    try:
        return Playbook.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UserError(f"--set: {_fmt_loc(tuple(err['loc']))}: {err['msg']} (fix: use a valid value)") from None


def line_at(path: str | Path, *loc: str | int) -> int:
    """The line of the field at `loc` in the playbook file (1 when it cannot be read): the
    checks made outside this loader name the line too."""
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return 1
    node = _node_at(root, loc)
    return node.start_mark.line + 1 if node is not None else 1
