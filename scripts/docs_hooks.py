"""mkdocs hook: the playbook reference, generated from the pydantic schema at build time.

Why generated: a hand-copied table of fields drifts from `campaign/playbook/schema.py`
the first time someone adds a field.  Here every field of every model a playbook can
hold is read from the schema itself (name, type, default, description), and its example
comes from the bundled playbooks under `playbooks/` (which the tests validate), else from
the field's `examples=`, else from its default.  `docs/reference/playbook.md` holds the
marker this hook replaces; `tests/test_docs.py` calls `reference_markdown()` directly.
"""

from __future__ import annotations

import json
import logging
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- playbook-reference -->"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pydantic import BaseModel  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402
from pydantic_core import PydanticUndefined  # noqa: E402


@dataclass
class Section:
    """One model of the playbook, with every place it appears and the playbook data found there."""

    model: type[BaseModel]
    paths: list[str] = field(default_factory=list)
    data: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (playbook file, mapping)

    @property
    def anchor(self) -> str:
        return self.model.__name__.lower()


def _node_kinds(annotation: Any) -> Any:
    """A `node:` entry is declared as the node spec base; it holds the registered kinds."""
    from campaign.playbook.nodes import NODE_SPECS, NodeSpecBase

    return typing.Union[tuple(NODE_SPECS.values())] if annotation is NodeSpecBase else annotation  # noqa: UP007


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through unions, lists and dicts)."""
    annotation = _node_kinds(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in get_args(annotation):
        out.extend(_models_in(arg))
    return out


def _container(annotation: Any) -> str:
    """How the field holds its model(s): "one", "list" or "dict" (of values)."""
    origin = get_origin(annotation)
    if origin in (list, typing.List):  # noqa: UP006
        return "list"
    if origin in (dict, typing.Dict):  # noqa: UP006
        return "dict"
    if origin is typing.Annotated:
        return _container(get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        kinds = {_container(a) for a in get_args(annotation) if a is not type(None)}
        return kinds.pop() if len(kinds) == 1 else "one"
    return "one"


def _matches(model: type[BaseModel], value: Any) -> bool:
    """A mapping belongs to a model of a union when its `kind` is that model's (or absent and default)."""
    if not isinstance(value, dict):
        return False
    kind = model.model_fields.get("kind")
    if kind is None:
        return True
    wanted = get_args(kind.annotation)
    return value.get("kind", kind.default) in wanted


def _children(values: list[tuple[str, Any]], container: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for src, v in values:
        if container == "list" and isinstance(v, list):
            out.extend((src, x) for x in v)
        elif container == "dict" and isinstance(v, dict):
            out.extend((src, x) for x in v.values())
        elif container == "one":
            out.append((src, v))
    return out


def collect(root: type[BaseModel], playbooks: list[tuple[str, dict[str, Any]]]) -> list[Section]:
    """Every model reachable from `root`, depth first in field order, each once."""
    sections: dict[type[BaseModel], Section] = {}

    def visit(model: type[BaseModel], path: str, data: list[tuple[str, Any]]) -> None:
        sec = sections.get(model)
        if sec is None:
            sec = sections[model] = Section(model)
        sec.paths.append(path)
        mine = [(src, d) for src, d in data if _matches(model, d)]
        sec.data.extend(mine)
        for name, info in model.model_fields.items():
            if name in _INTERNAL:
                continue
            container = _container(info.annotation)
            values = _children([(src, d[name]) for src, d in mine if name in d], container)
            suffix = "[]" if container == "list" else ".*" if container == "dict" else ""
            for sub in _models_in(info.annotation):  # the schema has no cycles
                visit(sub, f"{path}.{name}{suffix}" if path else f"{name}{suffix}", values)

    visit(root, "", playbooks)
    return list(sections.values())


#: fields the playbook's own machinery sets, never a user
_INTERNAL = {"stack_patches"}


def _type_name(annotation: Any, sections: dict[type[BaseModel], Section]) -> str:
    annotation = _node_kinds(annotation)
    origin = get_origin(annotation)
    args = get_args(annotation)
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        sec = sections.get(annotation)
        return f"[{annotation.__name__}](#{sec.anchor})" if sec else annotation.__name__
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0], sections)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a, sections) for a in args)
    if origin in (list, typing.List):  # noqa: UP006
        return f"list of {_type_name(args[0], sections)}"
    if origin in (dict, typing.Dict):  # noqa: UP006
        return f"mapping of {_type_name(args[0], sections)} to {_type_name(args[1], sections)}"
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation).replace("typing.", "")


def _flow(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_defaults=True)
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "its fields' defaults"
        return f"`{_flow(value)}`"
    if info.default is PydanticUndefined:
        return "required"
    return f"`{_flow(info.default)}`"


def _example(name: str, info: FieldInfo, sec: Section) -> str:
    inner = _models_in(info.annotation)
    if inner:
        return ", ".join(f"see [{m.__name__}](#{m.__name__.lower()})" for m in inner)
    for src, d in sec.data:
        if name in d and d[name] is not None:
            return f"`{name}: {_flow(d[name])}` ({src})"
    if info.examples:
        return f"`{name}: {_flow(info.examples[0])}`"
    if not info.is_required() and info.default_factory is None and info.default not in (None, PydanticUndefined):
        return f"`{name}: {_flow(info.default)}`"
    return ""


def _cell(text: str) -> str:
    """One table cell: a pipe escaped, and braces outside code spans kept from attr_list."""
    parts = " ".join(text.split()).replace("|", "\\|").split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("{", "&#123;").replace("}", "&#125;")
    return "`".join(parts)


@dataclass
class Row:
    name: str
    type: str
    default: str
    description: str
    example: str


def rows(sec: Section, sections: dict[type[BaseModel], Section]) -> list[Row]:
    return [
        Row(
            name,
            _type_name(info.annotation, sections),
            _default(info),
            info.description or "",
            _example(name, info, sec),
        )
        for name, info in sec.model.model_fields.items()
        if name not in _INTERNAL
    ]


def load_playbooks() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((ROOT / "playbooks").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if isinstance(data, dict):
            out.append((f"playbooks/{path.name}", data))
    return out


def reference_sections() -> tuple[list[Section], dict[type[BaseModel], Section]]:
    from campaign.playbook.schema import Playbook
    from tools.executors.registry import install_node_kinds

    install_node_kinds()  # the playbook's node kinds, as the composition root sets them
    secs = collect(Playbook, load_playbooks())
    return secs, {s.model: s for s in secs}


def reference_markdown() -> str:
    """The reference's body: one table per model, in the order a playbook reads."""
    secs, by_model = reference_sections()
    out: list[str] = []
    for sec in secs:
        where = ", ".join(f"`{p}`" for p in dict.fromkeys(sec.paths) if p) or "the top level"
        title = sec.paths[0] or "Playbook (top level)"
        kind = sec.model.model_fields.get("kind")
        kinds = get_args(kind.annotation) if kind is not None else ()
        if len(kinds) == 1 and sec.paths[0]:  # one member of the node union
            title += f" (kind: {kinds[0]})"
        out.append(f"## {title} {{#{sec.anchor}}}\n")
        doc = (sec.model.__doc__ or "").strip()
        if doc and sec.model.__module__.startswith(("campaign.", "tools.")):
            out.append(_cell(doc) + "\n")
        out.append(f"Where: {where}. Model: `{sec.model.__module__}.{sec.model.__name__}`.\n")
        out.append("| field | type | default | description | example |\n|---|---|---|---|---|")
        for r in rows(sec, by_model):
            out.append(
                f"| `{r.name}` | {_cell(r.type)} | {_cell(r.default)} | {_cell(r.description)} | {_cell(r.example)} |"
            )
        out.append("")
    return "\n".join(out)


def undescribed() -> list[str]:
    """Fields the reference cannot describe fully: no description, or no example anywhere."""
    secs, by_model = reference_sections()
    return [
        f"{s.model.__name__}.{r.name}: no {'description' if not r.description else 'example'} "
        f"(fix: Field(description=..., examples=[...]) in {s.model.__module__})"
        for s in secs
        for r in rows(s, by_model)
        if not r.description or not r.example
    ]


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs event: fill the marker on the reference page; a field without a description
    or an example is a warning, which `mkdocs build --strict` turns into a failed build."""
    if MARKER not in markdown:
        return markdown
    for problem in undescribed():
        logging.getLogger("mkdocs.hooks.playbook_reference").warning(problem)
    return markdown.replace(MARKER, reference_markdown())
