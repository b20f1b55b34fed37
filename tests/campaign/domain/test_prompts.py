"""Prompt sets: determinism, hashes, JSONL input."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.domain.models import WorkloadSpec
from campaign.domain.prompts import DIVERSE_POOL_SIZE, build_prompt_set, prompt_set_hash


def spec(**kw: object) -> WorkloadSpec:
    return WorkloadSpec(**({"name": "w"} | kw))


def test_generated_sets_are_deterministic_and_hashed_by_content() -> None:
    a, b = build_prompt_set(spec(prompts="diverse", seed=3)), build_prompt_set(spec(prompts="diverse", seed=3))
    assert a == b and a.hash == prompt_set_hash(list(a.prompts))
    assert build_prompt_set(spec(prompts="diverse", seed=4)).hash != a.hash
    assert build_prompt_set(spec(prompts="diverse", seed=3, prompt_tokens=100)).hash != a.hash
    assert len(a.prompts) == DIVERSE_POOL_SIZE and len(set(a.prompts)) == DIVERSE_POOL_SIZE
    lengths = [len(p.split()) for p in a.prompts]
    assert min(lengths) >= 256 and max(lengths) <= 769  # 0.5x .. 1.5x of 512 words


def test_a_sweep_longer_than_the_pool_gets_a_pool_as_long_and_the_same_first_prompts() -> None:
    short = build_prompt_set(spec(prompts="diverse", seed=3, concurrency=[1, 250], requests_per_level="C"))
    long = build_prompt_set(
        spec(prompts="diverse", seed=3, concurrency=[100, 250], requests_per_level="2*C", warmup_requests=1)
    )
    assert len(short.prompts) == DIVERSE_POOL_SIZE  # 253 requests: the default pool
    assert len(long.prompts) == 702 and len(set(long.prompts)) == 702  # 2 + 200 + 500
    assert long.prompts[:DIVERSE_POOL_SIZE] == short.prompts


def test_fixed_is_one_prompt_of_the_requested_length() -> None:
    fixed = build_prompt_set(spec(prompts="fixed", prompt_tokens=64))
    assert len(fixed.prompts) == 1 and len(fixed.prompts[0].split()) == 64
    assert fixed.for_request(0) == fixed.for_request(17)
    assert fixed.hash == build_prompt_set(spec(prompts="fixed", prompt_tokens=64, concurrency=[1, 8])).hash


def test_hash_is_a_known_value() -> None:
    assert prompt_set_hash(["a", "b"]) == prompt_set_hash(("a", "b")) != prompt_set_hash(["b", "a"])
    assert prompt_set_hash(["hello"]) == hashlib.sha256(b'["hello"]').hexdigest()[:16]  # stable across runs


def test_jsonl_prompts(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"prompt": "one"}) + "\n\n" + json.dumps({"prompt": "two", "extra": 1}) + "\n")
    ps = build_prompt_set(spec(prompts=str(path)))
    assert ps.prompts == ("one", "two") and ps.for_request(3) == "two"
    assert ps.hash == prompt_set_hash(["one", "two"])


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("{bad\n", "line 1: not valid JSON"),
        ('{"prompt": "a"}\n{"text": "b"}\n', "line 2: prompt"),
        ("\n", "no prompts"),
        ('{"prompt": ""}\n', "line 1"),
    ],
)
def test_bad_jsonl_is_a_user_error_naming_the_line(tmp_path: Path, content: str, match: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(content)
    with pytest.raises(UserError, match=match) as info:
        build_prompt_set(spec(prompts=str(path)))
    assert str(path) in str(info.value)


def test_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read"):
        build_prompt_set(spec(prompts=str(tmp_path / "absent.jsonl")))
