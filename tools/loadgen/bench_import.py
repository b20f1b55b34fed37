"""Import results of SGLang's ``bench_serving`` and vLLM's ``vllm bench serve``.

SGLang appends one JSON object per run to ``--output-file`` (JSONL); vLLM's
``--save-result`` writes one JSON object.  Both name figures ``mean_ttft_ms``,
``median_ttft_ms``, ``p99_ttft_ms``, ... ; end-to-end latency is ``*_e2e_latency_ms``
in SGLang and ``*_e2el_ms`` in vLLM, which is how the source is told apart.  Each run
becomes one ``LevelResult`` (its ``max_concurrency``).  Percentiles a file does not
carry (SGLang writes no p90; vLLM only those in ``--metric-percentiles``) are computed
from the per-request arrays when the file has them (``--output-details`` /
``--save-detailed``), else left at 0.0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from campaign.domain.errors import UserError
from tools.loadgen.stats import percentile
from campaign.domain.models import LevelResult, Stat, SweepResult

REQUIRED = ("max_concurrency", "completed", "duration", "output_throughput", "request_throughput", "mean_ttft_ms", "median_ttft_ms")


def _read_runs(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, run) pairs: a JSON object, a JSON list, or JSONL."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror}) (fix: the --output-file / --save-result file)") from exc
    try:
        data = json.loads(text)
        runs = data if isinstance(data, list) else [data]
        located = [(f"run {i + 1}", run) for i, run in enumerate(runs)]
    except json.JSONDecodeError:
        located = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                located.append((f"line {lineno}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise UserError(f"{path}: line {lineno}: not valid JSON ({exc.msg}) (fix: one JSON object per line)") from exc
    if not located:
        raise UserError(f"{path}: no benchmark runs in the file (fix: pass a bench_serving or vllm bench serve result)")
    for where, run in located:
        if not isinstance(run, dict):
            raise UserError(f"{path}: {where}: not a JSON object (fix: pass a bench_serving or vllm bench serve result)")
    return located


def _number(path: Path, where: str, run: dict, key: str, default: float | None = None) -> float:
    value = run.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        problem = "missing" if key not in run else f"not a number ({value!r})"
        raise UserError(f"{path}: {where}: {key}: {problem} (fix: a complete bench_serving / vllm bench serve result)")
    return float(value)


def _stat(run: dict, name: str, samples: list[float] | None) -> Stat:
    """Mean/median from the file; p90/p99 from the file or from per-request samples (s)."""
    ordered = sorted(samples) if samples else []

    def pick(pct: int) -> float:
        if isinstance(run.get(f"p{pct}_{name}_ms"), (int, float)):
            return float(run[f"p{pct}_{name}_ms"])
        return percentile(ordered, pct) * 1000 if ordered else 0.0

    return Stat(
        mean=float(run.get(f"mean_{name}_ms") or 0.0),
        p50=float(run.get(f"median_{name}_ms") or run.get(f"p50_{name}_ms") or 0.0),
        p90=pick(90),
        p99=pick(99),
    )


def _floats(values: Any) -> list[float] | None:
    if not isinstance(values, list):
        return None
    flat: list[float] = []
    for v in values:
        if isinstance(v, list):
            flat.extend(float(x) for x in v if isinstance(x, (int, float)))
        elif isinstance(v, (int, float)):
            flat.append(float(v))
    return flat or None


def _level(path: Path, where: str, run: dict, e2e_name: str) -> LevelResult:
    values = {key: _number(path, where, run, key) for key in REQUIRED}
    completed = int(values["completed"])
    errors = run.get("failed")
    if not isinstance(errors, int):
        errors = sum(1 for e in run.get("errors") or [] if e)
    duration = values["duration"]
    output_tokens = run.get("total_output_tokens")
    if not isinstance(output_tokens, int):
        output_tokens = round(values["output_throughput"] * duration)
    return LevelResult(
        concurrency=int(values["max_concurrency"]),
        requests=completed + errors,
        errors=errors,
        output_tokens=output_tokens,
        input_tokens=int(run.get("total_input_tokens") or 0),
        duration_s=duration,
        output_tokens_per_s=values["output_throughput"],
        requests_per_s=values["request_throughput"],
        ttft_ms=_stat(run, "ttft", _floats(run.get("ttfts"))),
        itl_ms=_stat(run, "itl", _floats(run.get("itls"))),
        tpot_ms=_stat(run, "tpot", None),
        e2e_ms=_stat(run, e2e_name, _floats(run.get("latencies"))),
        token_source="usage",
    )


def import_result(path: str | Path) -> SweepResult:
    """A SweepResult with one level per run of the file (wall time: time_scale 1.0)."""
    file = Path(path)
    located = _read_runs(file)
    levels = []
    source = "sglang"
    for where, run in located:
        is_vllm = any(k.endswith("_e2el_ms") for k in run) or "endpoint_type" in run
        source = "vllm" if is_vllm else "sglang"
        levels.append(_level(file, where, run, "e2el" if is_vllm else "e2e_latency"))
    first = located[0][1]
    model = first.get("model_id") or first.get("model") or ""
    return SweepResult(url=str(first.get("base_url") or ""), model=str(model), source=source, levels=levels, time_scale=1.0)
