"""What the model may answer and what every call leaves behind.

The wire schemas are written by hand so that they satisfy OpenAI's strict
structured-output rules (every property required, `additionalProperties: false`,
no free-form maps): flags and env travel as `[{"name", "value"}]` lists.  The
pydantic models accept that form and the plain-map form a model may produce when
the endpoint ignores `response_format`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from campaign.domain.models import FailureClass
from campaign.playbook.schema import KnobSpace

Scalar = str | int | float | bool | None
CallPurpose = Literal["propose", "analyze", "triage"]
ANALYSIS_MAX_WORDS = 120


def _pairs_to_map(v: object) -> object:
    """`[{"name": k, "value": v}, ...]` -> `{k: v}`; anything else unchanged.

    A repeated name is kept as a conflict marker so validation rejects it
    instead of silently keeping one of the two values.
    """
    if not isinstance(v, list):
        return v
    out: dict[str, object] = {}
    for item in v:
        if not isinstance(item, dict) or set(item) != {"name", "value"} or not isinstance(item["name"], str):
            raise ValueError('each entry must be {"name": ..., "value": ...}')
        if item["name"] in out:
            raise ValueError(f"'{item['name']}' is given twice")
        out[item["name"]] = item["value"]
    return out


class Proposal(BaseModel):
    """One hypothesis as the model proposes it, before the knob-space checks."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=80)
    rationale: str = Field(default="", max_length=2000)
    expected_effect: str = Field(default="", max_length=1000)
    flags: dict[str, Scalar] = Field(default_factory=dict)
    env: dict[str, Scalar] = Field(default_factory=dict)
    unset_flags: list[str] = Field(default_factory=list)
    patch: str | None = None
    revisit_of: str | None = None

    _flags_pairs = field_validator("flags", "env", mode="before")(lambda cls, v: _pairs_to_map(v))

    @field_validator("patch", "revisit_of", mode="before")
    @classmethod
    def _blank_is_none(cls, v: object) -> object:
        return None if isinstance(v, str) and not v.strip() else v


class AnalysisAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    analysis: str = Field(min_length=1, max_length=4000)


class TriageAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    failure_class: str


class Rejection(BaseModel):
    """Why one answer of the model was refused; `raw` is the (redacted) answer."""

    reason: str
    raw: str = ""


class LlmCallRecord(BaseModel):
    """One chat completion call, for the record.  Never holds the API key."""

    purpose: CallPurpose
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    prompt_hash: str  # sha256 of the JSON-serialised messages
    output_json: str | None = None  # the validated answer, or the refused answer's (redacted) text
    rejection: str | None = None  # why the answer was refused
    error: str | None = None  # the call itself failed (endpoint, auth, timeout)
    structured: bool = True  # response_format json_schema was used


# ------------------------------------------------------------------ wire schemas
def _pair_list(value_schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "value": value_schema},
            "required": ["name", "value"],
            "additionalProperties": False,
        },
    }


_SCALAR = {"type": ["string", "number", "boolean", "null"]}

PROPOSAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "short slug: lowercase letters, digits, '.', '_' or '-'"},
        "rationale": {"type": "string"},
        "expected_effect": {"type": "string"},
        "flags": _pair_list(_SCALAR),
        "env": _pair_list(_SCALAR),
        "unset_flags": {"type": "array", "items": {"type": "string"}},
        "patch": {"type": ["string", "null"], "description": "unified diff, or null"},
        "revisit_of": {"type": ["string", "null"], "description": "name of a reopened dead end, or null"},
    },
    "required": ["name", "rationale", "expected_effect", "flags", "env", "unset_flags", "patch", "revisit_of"],
    "additionalProperties": False,
}

ANALYSIS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"analysis": {"type": "string"}},
    "required": ["analysis"],
    "additionalProperties": False,
}

TRIAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"failure_class": {"type": "string", "enum": [c.value for c in FailureClass] + ["unknown"]}},
    "required": ["failure_class"],
    "additionalProperties": False,
}


def _named(names: dict[str, Any], value_of: Any, max_items: int | None = None) -> dict[str, Any]:
    """`[{"name", "value"}]` where each name is one declared knob with its own value schema."""
    if not names:
        return {**_pair_list(_SCALAR), "maxItems": 0}
    return {
        "type": "array",
        # each knob at most once (a repeated name is refused anyway), and no more than asked
        "maxItems": min(len(names), max_items or len(names)),
        "items": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"name": {"type": "string", "enum": [name]}, "value": value_of(spec)},
                    "required": ["name", "value"],
                    "additionalProperties": False,
                }
                for name, spec in names.items()
            ]
        },
    }


def _bounded(prop: dict[str, Any], max_chars: int | None) -> dict[str, Any]:
    return prop if max_chars is None else {**prop, "maxLength": max_chars}


def analysis_schema(text_max_chars: int | None = None) -> dict[str, Any]:
    """ANALYSIS_SCHEMA, its text bounded to `text_max_chars` when given."""
    props = {"analysis": _bounded(ANALYSIS_SCHEMA["properties"]["analysis"], text_max_chars)}
    return {**ANALYSIS_SCHEMA, "properties": props}


def proposal_schema(
    knobs: KnobSpace,
    allowed_flags: list[str] | None = None,
    text_max_chars: int | None = None,
    max_changes: int | None = None,
) -> dict[str, Any]:
    """PROPOSAL_SCHEMA narrowed to the playbook's knob space: knob names as enums, numeric
    bounds, choices, safe string values, no patch unless patches are allowed; the rationale
    and expected effect at most `text_max_chars` long, and each settings list at most
    `max_changes` long, when given."""
    from campaign.planner.knobs import HYPOTHESIS_NAME, value_schema

    flags = {n: s for n, s in knobs.flags.items() if allowed_flags is None or n in allowed_flags}
    unset = (
        {
            "type": "array",
            "items": {"type": "string", "enum": sorted(flags)},
            "maxItems": min(len(flags), max_changes or len(flags)),
        }
        if flags
        else {"type": "array", "items": {"type": "string"}, "maxItems": 0}
    )
    props = dict(PROPOSAL_SCHEMA["properties"])
    props.update(
        {
            "name": {**props["name"], "pattern": HYPOTHESIS_NAME.pattern},
            "rationale": _bounded(props["rationale"], text_max_chars),
            "expected_effect": _bounded(props["expected_effect"], text_max_chars),
            "flags": _named(flags, value_schema, max_changes),
            "env": _named(knobs.env, value_schema, max_changes),
            "unset_flags": unset,
            "patch": props["patch"]
            if knobs.patches is not None
            else {"type": "null", "description": "patches are not allowed"},
        }
    )
    return {**PROPOSAL_SCHEMA, "properties": props}


def with_reopened(schema: dict[str, Any], reopened: list[str]) -> dict[str, Any]:
    """`schema` with `revisit_of` narrowed to the dead ends that may be revisited now (null when none)."""
    revisit: dict[str, Any] = (
        {
            "type": ["string", "null"],
            "enum": [*sorted(reopened), None],
            "description": "name of a reopened dead end, or null",
        }
        if reopened
        else {"type": "null", "description": "no dead end is reopened"}
    )
    return {**schema, "properties": {**schema["properties"], "revisit_of": revisit}}


def response_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The `response_format` argument of chat.completions.create (strict JSON schema)."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
