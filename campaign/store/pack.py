"""Compact storage of what a campaign measures: one packed row per side and round.

Why: a week-long campaign holds 1,000+ experiments x 2 sides x 3 rounds x 16 levels.
One row per level with its JSON cost ~100 KB per experiment (keys repeated in every
row, two indexes over long text ids).  A side's round is written in one transaction
and read as a whole, so it is stored as one row: the level summaries' numbers column
by column (counts as exact integers, times as integer microseconds, rates as exact
IEEE doubles) behind a small JSON header naming the fields once, compressed.
Long text (greedy outputs, verdict details, logs) is compressed the same way.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from campaign.domain.models import LevelResult

__all__ = [
    "PACK_TEXT_FROM",
    "level_figures",
    "level_values",
    "pack_levels",
    "pack_text",
    "unpack_levels",
    "unpack_text",
]

PACK_TEXT_FROM = 256  # shorter text stays plain: compressing it saves nothing
_FORMAT = 2  # 1: every number a double (still read)


def _flatten(dump: dict[str, Any]) -> tuple[list[str], list[float], dict[str, Any]]:
    """Numeric leaves (one level of nesting: the latency stats) and everything else."""
    paths: list[str] = []
    values: list[float] = []
    extras: dict[str, Any] = {}
    for key, value in dump.items():
        if isinstance(value, dict) and value and all(_numeric(v) for v in value.values()):
            for sub, v in value.items():
                paths.append(f"{key}.{sub}")
                values.append(float(v))
        elif _numeric(value):
            paths.append(key)
            values.append(float(value))
        else:
            extras[key] = value
    return paths, values, extras


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_INT64 = 2**53  # larger magnitudes are kept as doubles (exact integers stop there)


def _scale_of(path: str) -> float:
    """Microseconds for a time: latency stats in ms and `duration_s`.  Finer digits are
    clock noise (an HTTP round trip jitters by tens of microseconds) and, as doubles, they
    do not compress: stored as integer microseconds a level costs half as much."""
    if path == "duration_s":
        return 1e6
    if "_ms." in path:
        return 1e3
    return 0.0


def _column_kinds(fields: list[str], columns: list[list[float]]) -> str:
    """Per field: `i` an integer field (exact), `u` a time in integer microseconds, `d` a double."""
    kinds = []
    for path, values in zip(fields, columns):
        scale = _scale_of(path)
        if path in _INT_FIELDS and all(v == int(v) and abs(v) < _INT64 for v in values):
            kinds.append("i")
        elif scale and all(math.isfinite(v) and abs(v * scale) < _INT64 for v in values):
            kinds.append("u")
        else:
            kinds.append("d")
    return "".join(kinds)


def pack_levels(levels: list[tuple[str, LevelResult, str]]) -> bytes:
    """(workload, result, work key) per level -> one compressed blob."""
    fields: list[str] | None = None
    header: list[list[Any]] = []
    numbers: list[float] = []
    for workload, result, work in levels:
        paths, values, extras = _flatten(result.model_dump(mode="json"))
        if fields is None:
            fields = paths
        if paths != fields:  # a differently shaped result: kept whole, as JSON
            header.append([workload, work, {"json": result.model_dump(mode="json")}])
            continue
        header.append([workload, work, extras])
        numbers.extend(values)
    fields = fields or []
    width = len(fields)
    rows = len(numbers) // width if width else 0
    columns = [[numbers[r * width + f] for r in range(rows)] for f in range(width)]  # like values side by side
    kinds = _column_kinds(fields, columns)
    head = json.dumps(
        {"v": _FORMAT, "fields": fields, "kinds": kinds, "levels": header}, separators=(",", ":")
    ).encode()
    raw = bytearray()
    for path, kind, column in zip(fields, kinds, columns):
        if kind == "d":
            raw += struct.pack(f"<{rows}d", *column)
        else:
            scale = _scale_of(path) if kind == "u" else 1.0
            raw += struct.pack(f"<{rows}q", *(round(v * scale) for v in column))
    shuffled = b"".join(raw[i::8] for i in range(8))  # byte planes: high bytes compress, noise does not
    return zlib.compress(struct.pack("<I", len(head)) + head + shuffled, 6)


@lru_cache(maxsize=256)
def _head(text: bytes) -> dict[str, Any]:
    """A blob's header, parsed once: the rounds of one campaign share a few (the same
    workloads, prompts and fields).  Shared: read, never changed, by the callers."""
    head: dict[str, Any] = json.loads(text)
    return head


class _Packed:
    """One decoded blob: its header and its numbers, a column un-shuffled and decoded only
    when asked (the journal and `show` read two columns of 24 for 1,000+ experiments)."""

    def __init__(self, blob: bytes, *, shared_head: bool = True) -> None:
        raw = zlib.decompress(blob)
        (n,) = struct.unpack_from("<I", raw, 0)
        # shared: parsed once per distinct header (`_head`); else this blob's own, which the
        # caller may hand on inside the results it builds
        self.head: dict[str, Any] = _head(raw[4 : 4 + n]) if shared_head else json.loads(raw[4 : 4 + n])
        self.version = self.head.get("v")
        if self.version not in (1, _FORMAT):
            raise ValueError(f"unknown packed-levels format {self.version!r}")
        self._planes = raw[4 + n :]
        self._count = len(self._planes) // 8  # numbers in the blob: byte plane i holds byte i of each
        self.fields: list[str] = self.head["fields"]
        self.rows = self._count // len(self.fields) if self.fields else 0

    def column(self, f: int, nums: bytes | None = None) -> list[float]:
        """Field `f`'s numbers; `nums`: every number already un-shuffled (`by_field`)."""
        rows, count, planes = self.rows, self._count, self._planes
        if nums is None:
            buf = bytearray(rows * 8)
            for i in range(8):  # the column's numbers are count-wide planes' slices [f*rows, (f+1)*rows)
                buf[i::8] = planes[i * count + f * rows : i * count + (f + 1) * rows]
            chunk = bytes(buf)
        else:
            chunk = nums[f * rows * 8 : (f + 1) * rows * 8]
        kind = "d" if self.version == 1 else self.head["kinds"][f]  # format 1: every number a double
        if kind == "d":
            return list(struct.unpack(f"<{rows}d", chunk))
        ints = struct.unpack(f"<{rows}q", chunk)
        if kind == "u":
            scale = _scale_of(self.fields[f])
            return [q / scale for q in ints]
        return [float(q) for q in ints]

    def unshuffled(self) -> bytes:
        """Every number's bytes, field by field (the planes un-shuffled once)."""
        planes, count = self._planes, self._count
        nums = bytearray(len(planes))
        for i in range(8):
            nums[i::8] = planes[i * count : (i + 1) * count]
        return bytes(nums)

    def by_field(self) -> list[float]:
        """Every number, field by field."""
        whole = self.unshuffled()
        return [v for f in range(len(self.fields)) for v in self.column(f, whole)]


def level_values(blob: bytes, metric: str, work: Mapping[str, str] | None = None) -> list[tuple[str, int, float]]:
    """(workload, concurrency, metric) per level, without building the level results:
    what the journal and `show` read for 1,000+ experiments.  `work`: only the levels
    whose recorded work key is the one given for their workload (others are dropped)."""
    packed = _Packed(blob)
    fields = packed.fields
    if "concurrency" not in fields or metric not in fields:
        return [
            (w, r.concurrency, float(getattr(r, metric)))
            for w, r, k in unpack_levels(blob)
            if work is None or work.get(w) == k
        ]
    cs = packed.column(fields.index("concurrency"))
    vs = packed.column(fields.index(metric))
    out: list[tuple[str, int, float]] = []
    i = 0
    for workload, key, extras in packed.head["levels"]:
        keep = work is None or work.get(workload) == key
        if "json" in extras and len(extras) == 1:
            if keep:
                out.append((workload, int(extras["json"]["concurrency"]), float(extras["json"][metric])))
            continue
        if keep:
            out.append((workload, int(cs[i]), vs[i]))
        i += 1
    return out


def level_figures(blob: bytes, fields: list[str]) -> list[tuple[str, int, list[float]]]:
    """(workload, concurrency, the `fields`' values) per level, like `level_values` for
    several fields at once (the blob decoded once).  A field is a `LevelResult` field or
    a stat of one (`ttft_ms.p99`); one a level does not hold reads 0."""
    packed = _Packed(blob)
    have = packed.fields
    if "concurrency" not in have or any(f not in have for f in fields):
        return [
            (w, r.concurrency, [_field_of(r.model_dump(mode="json"), f) for f in fields])
            for w, r, _ in unpack_levels(blob)
        ]
    whole = packed.unshuffled()  # one pass for every column asked (cheaper than a pass per column)
    cs = packed.column(have.index("concurrency"), whole)
    columns = [packed.column(have.index(f), whole) for f in fields]
    out: list[tuple[str, int, list[float]]] = []
    i = 0
    for workload, _key, extras in packed.head["levels"]:
        if "json" in extras and len(extras) == 1:
            out.append((workload, int(extras["json"]["concurrency"]), [_field_of(extras["json"], f) for f in fields]))
            continue
        out.append((workload, int(cs[i]), [col[i] for col in columns]))
        i += 1
    return out


def _field_of(dump: Mapping[str, Any], path: str) -> float:
    key, _, sub = path.partition(".")
    value = dump.get(key, 0.0)
    if sub:
        value = value.get(sub, 0.0) if isinstance(value, Mapping) else 0.0
    return float(value) if _numeric(value) else 0.0


def unpack_levels(blob: bytes) -> list[tuple[str, LevelResult, str]]:
    packed = _Packed(blob, shared_head=False)  # its header's values end up in the results
    head, by_field, rows = packed.head, packed.by_field(), packed.rows
    fields = packed.fields
    width = len(fields)
    nums = [by_field[f * rows + r] for r in range(rows) for f in range(width)]
    out: list[tuple[str, LevelResult, str]] = []
    split = [path.partition(".") for path in fields]
    i = 0
    for workload, work, extras in head["levels"]:
        if "json" in extras and len(extras) == 1:
            out.append((workload, LevelResult.model_validate(extras["json"]), work))
            continue
        data: dict[str, Any] = dict(extras)
        nested: dict[str, dict[str, float]] = {}
        for (key, _, sub), value in zip(split, nums[i : i + len(fields)]):
            if sub:
                nested.setdefault(key, {})[sub] = value
            else:
                data[key] = value
        i += len(fields)
        out.append((workload, _level(data, nested), work))
    return out


_INT_FIELDS = {name for name, f in LevelResult.model_fields.items() if f.annotation in (int, "int")}


def _level(data: dict[str, Any], nested: dict[str, dict[str, float]]) -> LevelResult:
    """Rebuild a result that was validated when it was recorded: constructed, not re-validated
    (6,000 packed rows are read for a 1,000-experiment view)."""
    for name in _INT_FIELDS & data.keys():
        data[name] = int(data[name])
    for key, values in nested.items():
        annotation = LevelResult.model_fields[key].annotation
        data[key] = annotation.model_construct(**values) if isinstance(annotation, type) else values
    try:
        return LevelResult.model_construct(**data)
    except Exception:
        return LevelResult.model_validate(data | nested)


def pack_text(text: str) -> bytes | None:
    """Compressed text, or None when it is short enough to stay plain."""
    return zlib.compress(text.encode("utf-8"), 6) if len(text) >= PACK_TEXT_FROM else None


def unpack_text(plain: str, packed: bytes | None) -> str:
    return zlib.decompress(packed).decode("utf-8") if packed else plain
