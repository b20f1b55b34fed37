"""Fuzz the playbook loader: whatever text arrives, the answer is a Playbook or a
UserError whose every line starts with the file name and is a single line.

Three generators: random values dropped into a valid playbook at real field paths
(wrong types, misspelled keys), random whole documents, and byte-level mutations of
the real example playbook's text.  Any other exception is a crash the user would see
as a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaign.domain.errors import UserError
from campaign.playbook.load import parse_playbook_text
from campaign.playbook.schema import Playbook

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "playbooks" / "eagle_verify.yaml").read_text()
SOURCE = "fuzz.yaml"

BASE: dict[str, Any] = {
    "name": "fuzz",
    "node": {"kind": "simulated", "time_scale": 10},
    "server": {"allowed_flags": ["cuda-graph-max-bs", "tp"]},
    "workloads": {"w": {"concurrency": [1, 2], "output_tokens": 8}},
    "verdict": {"repeats": {"min": 2, "max": 3}, "latency_limit": {"max_ms": 100}},
    "budget": {"max_experiments": 3},
    "knobs": {"flags": {"tp": {"type": "int", "min": 1, "max": 8}}},
    "hypotheses": [{"name": "a", "flags": {"cuda-graph-max-bs": 128}, "env": {"NCCL_ALGO": "Tree"}}],
}

FIELD_NAMES = [
    "name",
    "kind",
    "flags",
    "env",
    "workloads",
    "hypotheses",
    "concurrency",
    "journal",
    "node",
    "server",
    "verdict",
    "repeats",
    "min",
    "max",
    "allowed_flags",
    "patch",
    "unset_flags",
    "declares",
    "nodes",
    "budget",
    "review",
    "planner",
    "knobs",
    "type",
    "choices",
    "latency_limit",
    "max_ms",
    "flgs",
    "hypotheses ",
    "conccurrency",
    "depends_on",
    "revisit_on",
    "profile",
    "time_scale",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(["simulated", "ssh", "slurm", "local", "1.5", "C", "a"]),
)
keys = st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=12), st.integers(-3, 3), st.booleans())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, prefix + (i,))
    return out


BASE_PATHS = [p for p in _paths(BASE) if p]


def _set(doc: Any, path: tuple, value: Any, key: Any = None) -> Any:
    """`doc` with the value at `path` replaced (or, with `key`, the key renamed)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        out = dict(doc)
        if key is not None and not rest:
            out[key] = out.pop(head)
        else:
            out[head] = _set(doc[head], rest, value, key)
        return out
    out_l = list(doc)
    out_l[head] = _set(doc[head], rest, value, key)
    return out_l


def check(text: str) -> None:
    try:
        pb = parse_playbook_text(text, SOURCE)
    except UserError as exc:
        assert exc.lines, "a UserError with no message"
        for line in exc.lines:
            assert line.startswith(SOURCE), line
            assert "\n" not in line and "\r" not in line, repr(line)
            assert "Traceback" not in line
        return
    assert isinstance(pb, Playbook)


def _dump(doc: Any) -> str:
    try:
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError:  # e.g. a NaN key: not something a user can write either
        return yaml.safe_dump({"name": "x"})


#: FUZZ_SCALE=20 for a soak run; CI runs the default.
SCALE = int(os.environ.get("FUZZ_SCALE", "1"))
FUZZ = settings(max_examples=300 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_base_playbook_is_valid():
    assert parse_playbook_text(_dump(BASE), SOURCE).name == "fuzz"
    assert parse_playbook_text(EXAMPLE, SOURCE).hypotheses


@FUZZ
@given(path=st.sampled_from(BASE_PATHS), value=values)
def test_any_value_at_any_field(path: tuple, value: Any) -> None:
    check(_dump(_set(BASE, path, value)))


@FUZZ
@given(path=st.sampled_from([p for p in BASE_PATHS if not isinstance(p[-1], int)]), key=keys)
def test_any_key_renamed(path: tuple, key: Any) -> None:
    check(_dump(_set(BASE, path, None, key=key)))


@FUZZ
@given(doc=st.dictionaries(keys, values, max_size=8))
def test_any_document(doc: dict) -> None:
    check(_dump(doc))
    check(_dump({**BASE, **{k: v for k, v in doc.items() if isinstance(k, str)}}))


@st.composite
def mutated_text(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from([EXAMPLE, _dump(BASE)]))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 40)))
        op = draw(st.sampled_from(["delete", "insert", "replace", "dup_line", "indent"]))
        junk = draw(st.text(alphabet=st.sampled_from(list(":-[]{}#&*!|>'\"%@` \t\n,?abc01\x00\u00e9")), max_size=6))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + junk + text[i:]
        elif op == "replace":
            text = text[:i] + junk + text[j:]
        else:
            lines = text.splitlines(keepends=True) or [""]
            k = draw(st.integers(0, len(lines) - 1))
            lines.insert(k, lines[k]) if op == "dup_line" else lines.__setitem__(k, " " + lines[k])
            text = "".join(lines)
    return text


@settings(max_examples=500 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=mutated_text())
def test_mutated_yaml_text(text: str) -> None:
    check(text)


def test_known_nasty_inputs() -> None:
    for text in [
        "",
        "---\n---\n",
        "!!python/object:os.system {}",
        "name: [unclosed",
        "\x00",
        "a: &x [*x]",
        "name: t\nworkloads: {w: {}}\nhypotheses: [{name: a}, {name: a}]\n",
        "name: t\nworkloads: {w: {}}\nhypotheses: [{name: a, flags: {'x\\ny': 1}}]\n",
        "name: t\nworkloads: {w: {}}\n'bad\\nkey': 1\n",
        "name: t\nworkloads: {w: {}}\n? [1, 2]\n: 3\n",
        "name: t\nworkloads: {w: {}}\nnode: {kind: [1]}\n",
        "name: t\nworkloads: {w: {}}\nnode: 7\n",
        "name: t\nworkloads: {1: {}}\n",
        "name: t\nworkloads: {w: {}}\nhypotheses: {a: 1}\n",
        "function-: null\n",
        "name: t\nworkloads: {w: {}}\nfunction-after[x]: 1\n",
    ]:
        check(text)
