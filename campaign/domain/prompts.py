"""Prompt sets for load sweeps: the *work* that two results must share to be compared.

A prompt set is deterministic for a given workload (same seed, same lengths, same
file content -> same prompts), and it carries a stable hash; with the order the prompts
are handed out in and the rest of the workload's requests, that hash is part of the work
key every stored level carries (`campaign.domain.work`).  A sweep hands the prompts out
in order, one cursor over all its levels (``tools/loadgen/sweep.py``), so request ``k``
of the sweep gets prompt ``k % len(set)`` and no level re-serves an earlier level's
prompts while the set lasts.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from campaign.domain.errors import UserError
from campaign.domain.models import WorkloadSpec
from campaign.domain.request_count import requests_for_level

#: least size of the generated "diverse" pool: the default playbook's parallel sweep sends
#: 509 requests.  A longer sweep gets a pool as long as itself (``sweep_requests``): a
#: prompt sent twice in one launch hits the prefix cache and flatters the server.  The
#: first 512 prompts are the same whatever the pool's size.
DIVERSE_POOL_SIZE = 512

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "they",
    "this",
    "which",
    "system",
    "model",
    "server",
    "token",
    "cache",
    "batch",
    "memory",
    "kernel",
    "graph",
    "stream",
    "request",
    "latency",
    "river",
    "mountain",
    "forest",
    "ocean",
    "desert",
    "city",
    "village",
    "bridge",
    "castle",
    "garden",
    "window",
    "door",
    "light",
    "shadow",
    "storm",
    "winter",
    "summer",
    "autumn",
    "spring",
    "morning",
    "evening",
    "night",
    "silver",
    "golden",
    "quick",
    "slow",
    "bright",
    "dark",
    "ancient",
    "modern",
    "simple",
    "complex",
    "quiet",
    "loud",
    "gentle",
    "fierce",
    "explain",
    "describe",
    "compare",
    "summarize",
    "translate",
    "analyze",
    "imagine",
    "consider",
    "remember",
    "history",
    "science",
    "music",
    "poetry",
    "physics",
    "chemistry",
    "biology",
    "economics",
    "language",
    "travel",
    "engine",
    "signal",
    "network",
    "channel",
    "packet",
    "vector",
    "matrix",
    "tensor",
    "layer",
    "attention",
    "decode",
    "number",
    "letter",
    "story",
    "question",
    "answer",
    "problem",
    "reason",
    "method",
    "result",
    "theory",
    "example",
]


@dataclass(frozen=True)
class PromptSet:
    """The prompts of one workload and the hash that names them."""

    prompts: tuple[str, ...]
    hash: str
    origin: str  # "fixed", "diverse" or the JSONL path

    def for_request(self, index: int) -> str:
        return self.prompts[index % len(self.prompts)]


def prompt_set_hash(prompts: list[str] | tuple[str, ...]) -> str:
    """Stable 16-hex-digit hash of an ordered prompt list."""
    blob = json.dumps(list(prompts), ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(max(1, count)))


def generate_fixed(prompt_tokens: int, seed: int) -> list[str]:
    """One prompt of about ``prompt_tokens`` words, repeated for every request."""
    rng = random.Random(f"fixed:{seed}")
    return [_words(rng, prompt_tokens)]


def generate_diverse(prompt_tokens: int, seed: int, size: int = DIVERSE_POOL_SIZE) -> list[str]:
    """``size`` distinct prompts, lengths uniform in [0.5, 1.5] x ``prompt_tokens`` words.

    Each prompt starts with its index so no two share a long prefix by accident.
    """
    rng = random.Random(f"diverse:{seed}")
    prompts = []
    for i in range(size):
        length = max(1, round(prompt_tokens * rng.uniform(0.5, 1.5)))
        prompts.append(f"{i}: {_words(rng, length - 1)}")
    return prompts


def load_jsonl(path: str | Path) -> list[str]:
    """Read ``{"prompt": ...}`` lines; blank lines are skipped."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(
            f'{p}: cannot read prompts file ({exc.strerror}) (fix: give a JSONL file with {{"prompt": ...}} lines)'
        ) from exc
    prompts: list[str] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(
                f'{p}: line {lineno}: not valid JSON ({exc.msg}) (fix: one {{"prompt": ...}} object per line)'
            ) from exc
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not row["prompt"]:
            raise UserError(f'{p}: line {lineno}: prompt: missing or not a non-empty string (fix: {{"prompt": "..."}})')
        prompts.append(row["prompt"])
    if not prompts:
        raise UserError(f'{p}: prompts: the file holds no prompts (fix: add {{"prompt": ...}} lines)')
    return prompts


def sweep_requests(workload: WorkloadSpec) -> int:
    """Requests one sweep of ``workload`` sends, warm-ups included."""
    return sum(
        workload.warmup_requests + requests_for_level(workload.requests_per_level, c) for c in workload.concurrency
    )


def build_prompt_set(workload: WorkloadSpec) -> PromptSet:
    """The prompt set a workload names: "fixed", "diverse", or a JSONL path (a file shorter
    than the sweep is served round again: its prompts are the user's)."""
    if workload.prompts == "fixed":
        prompts = generate_fixed(workload.prompt_tokens, workload.seed)
    elif workload.prompts == "diverse":
        prompts = generate_diverse(
            workload.prompt_tokens, workload.seed, size=max(DIVERSE_POOL_SIZE, sweep_requests(workload))
        )
    else:
        prompts = load_jsonl(workload.prompts)
    return PromptSet(prompts=tuple(prompts), hash=prompt_set_hash(prompts), origin=workload.prompts)
