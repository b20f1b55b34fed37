"""A small parser for the Prometheus text exposition format (what vLLM's `/metrics`
serves), so reading engine counters needs no extra dependency."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, Field

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class Sample(BaseModel):
    """One line of a scrape: metric name, labels and value."""

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    value: float


def _labels(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if m is None:
            break
        out[m.group(1)] = re.sub(r'\\[\\"n]', lambda e: _UNESCAPE[e.group(0)], m.group(2))
        pos = m.end()
    return out


def _value(text: str) -> float | None:
    try:
        return float(text)  # accepts NaN, +Inf, -Inf
    except ValueError:
        return None


def parse(text: str) -> list[Sample]:
    """Every sample line; comments (# HELP/# TYPE) and malformed lines are skipped."""
    samples: list[Sample] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        value = _value(m.group("value"))
        if value is None:
            continue
        samples.append(Sample(name=m.group("name"), labels=_labels(m.group("labels") or ""), value=value))
    return samples


def total(samples: Iterable[Sample], name: str, where: Mapping[str, str] | None = None) -> float | None:
    """Sum of a metric over its label sets (engines, models), or None when absent.
    NaN samples are ignored (an idle gauge)."""
    found = [
        s.value
        for s in samples
        if s.name == name and not math.isnan(s.value) and all(s.labels.get(k) == v for k, v in (where or {}).items())
    ]
    return sum(found) if found else None
