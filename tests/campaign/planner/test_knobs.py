"""The knob-space checks: only declared, typed, in-range, shell-safe values pass."""

from __future__ import annotations

import pytest

from campaign.planner.knobs import check_setting, check_settings, unsafe_reason
from tests.campaign.planner.conftest import make_playbook

KNOBS = make_playbook().knobs


@pytest.mark.parametrize(
    "value",
    [
        "1; rm -rf /",
        "a|b",
        "a&b",
        "$(id)",
        "`id`",
        "a>b",
        "a<b",
        "(x)",
        "{x}",
        "a b",
        "a\nb",
        "a\tb",
        "a\x00b",
        "a\x1bb",
        "'x'",
        '"x"',
        "x*",
        "~root",
        "\u0430bc",
        "",
    ],
)
def test_unsafe_values_are_refused(value: str) -> None:
    assert unsafe_reason(value) is not None


@pytest.mark.parametrize("value", ["eagle3", "0.85", "-1", "1e-3", "a/b:c,d=e+f@g%h", 256, 0.9, True])
def test_plain_scalars_are_safe(value: object) -> None:
    assert unsafe_reason(value) is None  # type: ignore[arg-type]


def test_value_that_reads_as_an_option_is_refused() -> None:
    assert "start with '-'" in (unsafe_reason("--trust-remote-code") or "")
    assert unsafe_reason(None) is not None
    assert unsafe_reason(float("nan")) is not None


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("cuda-graph-max-bs", 256, 256),
        ("cuda-graph-max-bs", 256.0, 256),
        ("cuda-graph-max-bs", "128", 128),
        ("mem-fraction-static", "0.9", 0.9),
        ("attention-backend", "fa3", "fa3"),
        ("enable-torch-compile", "true", True),
        ("speculative-algorithm", "EAGLE3", "EAGLE3"),
    ],
)
def test_declared_values_are_normalised(name: str, value: object, expected: object) -> None:
    normalised, problem = check_setting("flag", name, value, KNOBS.flags)  # type: ignore[arg-type]
    assert problem is None
    assert normalised == expected and type(normalised) is type(expected)


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("cuda-graph-max-bs", 4096, "above the maximum 512"),
        ("cuda-graph-max-bs", 0, "below the minimum 1"),
        ("cuda-graph-max-bs", 2.5, "expected an integer"),
        ("cuda-graph-max-bs", True, "boolean"),
        ("mem-fraction-static", 0.99, "above the maximum"),
        ("attention-backend", "xformers", "is not one of"),
        ("enable-torch-compile", "yes", "expected true or false"),
        ("trust-remote-code", True, "not in the knob space"),
        ("Bad_Flag", 1, "malformed"),
        ("speculative-algorithm", "1; rm -rf /", "unsafe characters"),
    ],
)
def test_bad_flag_values_are_refused_with_a_reason(name: str, value: object, reason: str) -> None:
    _, problem = check_setting("flag", name, value, KNOBS.flags)  # type: ignore[arg-type]
    assert problem is not None and reason in problem


def test_env_values_become_strings_and_names_are_checked() -> None:
    settings, problems = check_settings({}, {"NCCL_MIN_NCHANNELS": 4, "NCCL_ALGO": "Ring"}, [], KNOBS)
    assert problems == [] and settings.env == {"NCCL_MIN_NCHANNELS": "4", "NCCL_ALGO": "Ring"}
    _, problems = check_settings({}, {"LD_PRELOAD": "/tmp/x.so", "nccl_algo": "Ring"}, [], KNOBS)
    assert any("LD_PRELOAD" in p and "not in the knob space" in p for p in problems)
    assert any("malformed" in p for p in problems)


def test_unset_flags_must_be_declared_and_not_also_set() -> None:
    _, problems = check_settings({"tp-size": 4}, {}, ["tp-size", "model-path"], KNOBS)
    assert any("both set and unset" in p for p in problems)
    assert any("'model-path'" in p for p in problems)


def test_server_allowed_flags_narrow_the_knob_space() -> None:
    _, problems = check_settings({"tp-size": 4}, {}, [], KNOBS, allowed_flags=["cuda-graph-max-bs"])
    assert problems == ["flag 'tp-size' is not in server.allowed_flags"]
