"""Deterministic pseudo-text: token counting, the generated words, and how predictable
a prompt's continuation is (what a speculative drafter's acceptance depends on).

Greedy output is a pure function of the prompt, so a correctness gate can compare a
candidate's outputs with the baseline's; a broken kernel (`corrupt=True`) diverges for
a deterministic share of prompts after a few tokens.
"""

from __future__ import annotations

import hashlib
import random
import re

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_WORD_RE = re.compile(r"\w+")

#: predictability of a highly repetitive prompt (a fixed benchmark prompt repeated)
FIXED_PREDICTABILITY = 0.30
#: mean predictability of diverse, non-repetitive prompts
DIVERSE_PREDICTABILITY = 0.213
_DIVERSE_SPREAD = 0.05
#: share of prompts whose greedy output a broken kernel corrupts
CORRUPT_SHARE = 0.35


def _make_vocab(n: int = 2048) -> list[str]:
    rng = random.Random(1234)
    onsets = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "st", "tr", "pl"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
    codas = ["", "", "n", "r", "s", "l", "th", "nd"]
    words: set[str] = set()
    while len(words) < n:
        words.add(
            "".join(
                rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(rng.choice((1, 2, 2, 3)))
            )
        )
    return sorted(words)


VOCAB = _make_vocab()


def count_tokens(text: str) -> int:
    """Tokens of a text: words and punctuation marks (a stand-in tokenizer)."""
    return max(1, len(_TOKEN_RE.findall(text)))


def _unit(text: str, salt: str = "") -> float:
    digest = hashlib.blake2b((salt + text).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def repetitiveness(text: str) -> float:
    """Share of repeated word bigrams (0: every bigram new; ~1: one phrase repeated)."""
    words = _WORD_RE.findall(text.lower())
    if len(words) < 4:
        return 0.0
    bigrams = list(zip(words, words[1:]))
    return 1.0 - len(set(bigrams)) / len(bigrams)


def prompt_predictability(text: str, *, repeated: bool = False) -> float:
    """Per-token chance that the drafter's top guess is right for this prompt's answer.

    A fixed benchmark prompt (`repeated`: the same prompt as the request before it) or a
    repetitive text yields formulaic continuations; diverse prompts spread around the
    diverse mean."""
    rn = 1.0 if repeated else min(1.0, repetitiveness(text) / 0.8)
    jitter = (2 * _unit(text, "pred") - 1) * _DIVERSE_SPREAD * (1 - rn)
    return DIVERSE_PREDICTABILITY + (FIXED_PREDICTABILITY - DIVERSE_PREDICTABILITY) * rn + jitter


def diverse_predictability(i: int) -> float:
    """The i-th of an evenly spread sequence with the same distribution as diverse prompts."""
    frac = (i * 0.6180339887498949 + 0.5) % 1.0
    return DIVERSE_PREDICTABILITY + (2 * frac - 1) * _DIVERSE_SPREAD


def corrupted_by_broken_kernel(prompt: str) -> bool:
    return _unit(prompt, "corrupt") < CORRUPT_SHARE


class TextStream:
    """The words one request generates, token by token."""

    def __init__(self, prompt: str, *, greedy: bool, sample_seed: int = 0, corrupt: bool = False) -> None:
        seed = int(_unit(prompt, "text") * 2**62)
        self._rng = random.Random(seed if greedy else seed ^ sample_seed)
        self._diverge_at = -1
        if greedy and corrupt and corrupted_by_broken_kernel(prompt):
            self._diverge_at = 4 + int(_unit(prompt, "where") * 24)
            self._bad = random.Random(seed ^ 0x5EED)
        self._pos = 0

    def take(self, n: int) -> str:
        parts = []
        for _ in range(n):
            rng = self._bad if 0 <= self._diverge_at <= self._pos else self._rng
            if self._diverge_at >= 0 and self._pos >= self._diverge_at:
                self._rng.getrandbits(11)  # keep the good stream aligned
            word = VOCAB[rng.getrandbits(11)]
            parts.append(("" if self._pos == 0 else " ") + word + ("." if self._pos % 17 == 16 else ""))
            self._pos += 1
        return "".join(parts)
