from __future__ import annotations

import json
import subprocess
import sys

import pytest

from campaign.domain.config import diff, merge, render_argv, render_flags, undeclared
from campaign.domain.errors import UserError
from campaign.domain.models import EffectiveConfig

BASE = EffectiveConfig(
    flags={"cuda-graph-max-bs": 512, "mem-fraction-static": 0.88, "tp": 8}, env={"NCCL_ALGO": "Ring"}
)
TEMPLATE = "{python} -m sglang.launch_server --model-path {model} --port {port} {flags}"


def test_merge_sets_unsets_and_normalises_dashes() -> None:
    merged = merge(
        BASE,
        {"--cuda-graph-max-bs": 128, "enable-flashinfer-allreduce-fusion": True},
        {"NCCL_MIN_NCHANNELS": "4"},
        unset_flags=["--tp"],
    )
    assert merged.flags == {
        "cuda-graph-max-bs": 128,
        "mem-fraction-static": 0.88,
        "enable-flashinfer-allreduce-fusion": True,
    }
    assert merged.env == {"NCCL_ALGO": "Ring", "NCCL_MIN_NCHANNELS": "4"}
    assert BASE.flags["cuda-graph-max-bs"] == 512  # the baseline is not touched


def test_merge_keeps_structured_values_as_json() -> None:
    spec = {"method": "ngram", "num_speculative_tokens": 3}
    merged = merge(BASE, {"speculative-config": spec}, {})
    assert json.loads(merged.flags["speculative-config"]) == spec


def test_merge_rejects_unsupported_values() -> None:
    with pytest.raises(UserError, match="flags: x: unsupported value"):
        merge(BASE, {"x": object()}, {})


def test_render_flags() -> None:
    argv = render_flags({"a": True, "b": False, "c": None, "--d": 3, "e": {"k": [1, 2]}, "f": [1, 2], "g": "x y"})
    assert argv == ["--a", "--d", "3", "--e", '{"k":[1,2]}', "--f", "[1,2]", "--g", "x y"]


def test_render_argv_keeps_every_value_one_literal_item() -> None:
    cfg = EffectiveConfig(
        flags={"served-model-name": "m; rm -rf / $(id)", "enable-x": True, "mem-fraction-static": 0.8}
    )
    argv = render_argv(TEMPLATE, cfg, python=sys.executable, model="/models/my model", port=30000)
    assert argv == [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/my model",
        "--port",
        "30000",
        "--served-model-name",
        "m; rm -rf / $(id)",
        "--enable-x",
        "--mem-fraction-static",
        "0.8",
    ]


def test_rendered_argv_reaches_a_real_process_unchanged(tmp_path) -> None:
    cfg = EffectiveConfig(flags={"value": "a'b\"c `whoami` > out"})
    argv = render_argv(
        "{python} -c 'import sys, json; print(json.dumps(sys.argv[1:]))' {flags}", cfg, python=sys.executable
    )
    out = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert json.loads(out) == ["--value", "a'b\"c `whoami` > out"]
    assert not (tmp_path / "out").exists()


def test_render_argv_supports_embedded_placeholders() -> None:
    argv = render_argv("serve --port={port} {flags}", EffectiveConfig(), port=8000)
    assert argv == ["serve", "--port=8000"]


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("serve {modle} {flags}", r"unknown placeholder \{modle\}"),
        ("serve --x={flags}", r"\{flags\} inside"),
        ("serve 'unbalanced", "balance the quotes"),
    ],
)
def test_render_argv_bad_templates(template: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        render_argv(template, EffectiveConfig(), model="m")


def test_diff_lists_added_removed_changed() -> None:
    after = EffectiveConfig(
        flags={"--cuda-graph-max-bs": 128, "mem-fraction-static": 0.88, "speculative-algorithm": "EAGLE3"},
        env={"NCCL_ALGO": "Tree"},
    )
    changes = {(c.kind, c.key, c.change, c.before, c.after) for c in diff(BASE, after)}
    assert changes == {
        ("flag", "cuda-graph-max-bs", "changed", 512, 128),
        ("flag", "speculative-algorithm", "added", None, "EAGLE3"),
        ("flag", "tp", "removed", 8, None),
        ("env", "NCCL_ALGO", "changed", "Ring", "Tree"),
    }


def test_diff_compares_what_the_server_sees() -> None:
    a = EffectiveConfig(flags={"tp": 8, "x": True, "y": False})
    b = EffectiveConfig(flags={"tp": "8", "x": 1, "y": None})
    assert [(c.key, c.change) for c in diff(a, b)] == [("x", "changed")]
    assert diff(BASE, BASE) == []


def test_undeclared_catches_the_confounder() -> None:
    """The seeds' inconclusive NCCL-channels run: the memory fraction changed too."""
    candidate = merge(BASE, {"mem-fraction-static": 0.80}, {"NCCL_MIN_NCHANNELS": "2"})
    changes = diff(BASE, candidate)
    confounders = undeclared(changes, {"NCCL_MIN_NCHANNELS"})
    assert [(c.kind, c.key) for c in confounders] == [("flag", "mem-fraction-static")]
    assert undeclared(changes, {"--mem-fraction-static", "NCCL_MIN_NCHANNELS"}) == []
    assert len(undeclared(changes, {"nccl_min_nchannels", "mem-fraction-static"})) == 1  # env names are exact
