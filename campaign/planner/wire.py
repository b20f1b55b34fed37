"""Reading an OpenAI-compatible endpoint's answer without trusting its shape.

The `openai` client parses a 200 response into its own models leniently: an HTML
page becomes a `str`, `choices: "x"` or `message: null` pass through and fail later
as an AttributeError far from the call.  The planner therefore reads the raw body
itself, bounded in size and time, and accepts exactly one shape: a JSON object with
a non-empty `choices` list whose first `message` holds text.  Anything else is a
`BadBody` with one line saying what arrived, so the call is recorded as a failure
and retried like a transport error.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: the largest answer read; a proposal with a patch is far smaller.
MAX_BODY_BYTES = 1 << 20
_TOKENS_CAP = 10**9


class BadBody(Exception):
    """HTTP 200 whose body is not a usable chat completion; `str()` is one safe line."""


@dataclass
class Completion:
    content: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None


def read_body(chunks: Iterable[bytes], *, limit: int = MAX_BODY_BYTES, deadline: float | None = None) -> bytes:
    """The whole body, or BadBody when it exceeds `limit` bytes or `deadline` (monotonic) passes."""
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > limit:
            raise BadBody(f"a body larger than {limit // 1024} KiB (read stopped)")
        if deadline is not None and time.monotonic() > deadline:
            raise BadBody(f"a body still arriving at the deadline ({len(out)} bytes read)")
    return bytes(out)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")


def _snippet(text: str, n: int = 60) -> str:
    """A short `repr` of untrusted text: control and bidi characters come out escaped."""
    return repr(" ".join(text.split())[:n])


def _tokens(usage: Any, key: str) -> int:
    value = usage.get(key) if isinstance(usage, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return 0
    return int(min(value, _TOKENS_CAP))


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if content is None:
        refusal = message.get("refusal")
        return f"(refused: {refusal})" if isinstance(refusal, str) and refusal else ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in content):
        return "".join(p["text"] for p in content)  # the content-parts form some servers use
    raise BadBody(f"choices[0].message.content is {_kind(content)}, not text")


def parse_completion(body: bytes, content_type: str = "") -> Completion:
    """The first choice's text and the token counts, or BadBody naming what arrived."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadBody(f"a body that is not UTF-8 text ({len(body)} bytes)") from None
    if not text.strip():
        raise BadBody("an empty body")
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        if text.lstrip()[:1] == "<" or "html" in content_type.lower():
            raise BadBody(
                f"an HTML page, not a chat completion: {_snippet(text)} "
                "(fix: planner.base_url must be the API root, e.g. http://host:8000/v1)"
            ) from None
        raise BadBody(f"a body that is not JSON: {_snippet(text)}") from None
    if not isinstance(obj, dict):
        raise BadBody(f"JSON {_kind(obj)} instead of a chat completion object")
    choices = obj.get("choices")
    if choices is None and "error" in obj:
        err = obj["error"]
        message = err.get("message") if isinstance(err, dict) else err
        raise BadBody(f"an error object: {_snippet(str(message), 120)}")
    if not isinstance(choices, list):
        raise BadBody(f"'choices' is {_kind(choices)}, not a list")
    if not choices:
        raise BadBody("no choices")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise BadBody(f"choices[0] is {_kind(choice)}, not an object")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise BadBody(f"choices[0].message is {_kind(message)}, not an object")
    finish = choice.get("finish_reason")
    usage = obj.get("usage")
    return Completion(
        content=_content(message),
        prompt_tokens=_tokens(usage, "prompt_tokens"),
        completion_tokens=_tokens(usage, "completion_tokens"),
        finish_reason=finish if isinstance(finish, str) else None,
    )


def one_line(text: str, limit: int = 300) -> str:
    """Untrusted text as one line: whitespace runs (newlines too) become one space."""
    return " ".join(text.split())[:limit]
