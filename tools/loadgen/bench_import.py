"""Import results of SGLang's ``bench_serving`` and vLLM's ``vllm bench serve``.

SGLang appends one JSON object per run to ``--output-file`` (JSONL); vLLM's
``--save-result`` writes one JSON object.  Both name figures ``mean_ttft_ms``,
``median_ttft_ms``, ``p99_ttft_ms``, ... ; end-to-end latency is ``*_e2e_latency_ms``
in SGLang and ``*_e2el_ms`` in vLLM, which is how the source is told apart.  Each run
becomes one ``LevelResult`` (its ``max_concurrency``).  Percentiles a file does not
carry (SGLang writes no p90; vLLM only those in ``--metric-percentiles``) are computed
from the per-request arrays when the file has them (``--output-details`` /
``--save-detailed``; vLLM >= 0.31 keeps ``latencies`` always), else left at 0.0; so are
the mean and median of a metric left out of vLLM's ``--percentile-metrics`` (e2el by
default).  A run without a concurrency limit (``--request-rate`` only: ``max_concurrency``
null) is labelled with its peak concurrent requests as vLLM prints it, else SGLang's
measured mean concurrency, else (vLLM <= 0.10) request rate x mean E2E latency, rounded.
Checked against files written by the real clients: tests/tools/loadgen/real_formats.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from campaign.domain.errors import UserError
from campaign.domain.models import LevelResult, Stat, SweepResult
from tools.loadgen.stats import percentile

REQUIRED = ("completed", "duration", "output_throughput", "request_throughput", "mean_ttft_ms", "median_ttft_ms")


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
                raise UserError(
                    f"{path}: line {lineno}: not valid JSON ({exc.msg}) (fix: one JSON object per line)"
                ) from exc
    if not located:
        raise UserError(f"{path}: no benchmark runs in the file (fix: pass a bench_serving or vllm bench serve result)")
    for where, run in located:
        if not isinstance(run, dict):
            raise UserError(
                f"{path}: {where}: not a JSON object (fix: pass a bench_serving or vllm bench serve result)"
            )
    return located


def _number(path: Path, where: str, run: dict[str, Any], key: str, default: float | None = None) -> float:
    value = run.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        problem = "missing" if key not in run else f"not a number ({value!r})"
        raise UserError(f"{path}: {where}: {key}: {problem} (fix: a complete bench_serving / vllm bench serve result)")
    return float(value)


def _stat(run: dict[str, Any], name: str, samples: list[float] | None) -> Stat:
    """Mean/median from the file; p90/p99 from the file or from per-request samples (s)."""
    ordered = sorted(samples) if samples else []

    def pick(pct: int) -> float:
        if isinstance(run.get(f"p{pct}_{name}_ms"), (int, float)):
            return float(run[f"p{pct}_{name}_ms"])
        return percentile(ordered, pct) * 1000 if ordered else 0.0

    def central(key: str, from_samples: float) -> float:
        if isinstance(run.get(key), (int, float)):
            return float(run[key])
        return from_samples * 1000 if ordered else 0.0

    mean = central(f"mean_{name}_ms", sum(ordered) / len(ordered) if ordered else 0.0)
    p50 = run.get(f"p50_{name}_ms")
    return Stat(
        mean=mean,
        p50=float(p50)
        if isinstance(p50, (int, float))
        else central(f"median_{name}_ms", percentile(ordered, 50) if ordered else 0.0),
        p90=pick(90),
        p99=pick(99),
    )


def _floats(values: Any, *, positive: bool = False) -> list[float] | None:
    """Per-request samples (s); `positive` drops the 0.0 a failed request leaves."""
    if not isinstance(values, list):
        return None
    flat: list[float] = []
    for v in values:
        if isinstance(v, list):
            flat.extend(float(x) for x in v if isinstance(x, (int, float)))
        elif isinstance(v, (int, float)):
            flat.append(float(v))
    if positive:
        flat = [x for x in flat if x > 0]
    return flat or None


def _concurrency(path: Path, where: str, run: dict[str, Any]) -> int:
    """The client's limit; without one, the peak (or SGLang's mean) it measured."""
    if run.get("max_concurrency") is not None:
        return int(_number(path, where, run, "max_concurrency"))
    for key in ("max_concurrent_requests", "concurrency"):
        value = run.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return max(1, round(value))
    # vLLM <= 0.10 writes neither: Little's law, mean in flight = request rate x mean latency
    rate, e2e = run.get("request_throughput"), run.get("mean_e2el_ms")
    if isinstance(rate, (int, float)) and isinstance(e2e, (int, float)) and rate > 0 and e2e > 0:
        return max(1, round(rate * e2e / 1000))
    raise UserError(
        f"{path}: {where}: max_concurrency: missing and no measured concurrency "
        "(fix: a complete bench_serving / vllm bench serve result)"
    )


def _level(path: Path, where: str, run: dict[str, Any], e2e_name: str) -> LevelResult:
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
        concurrency=_concurrency(path, where, run),
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
        e2e_ms=_stat(run, e2e_name, _floats(run.get("latencies"), positive=True)),
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
    return SweepResult(
        url=str(first.get("base_url") or ""), model=str(model), source=source, levels=levels, time_scale=1.0
    )
