"""Bad playbooks: one line per problem naming file, line, field and fix; never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.playbook.load import apply_overrides, load_playbook, parse_playbook_text

ROOT = Path(__file__).resolve().parents[3]

GOOD = """\
name: t
workloads:
  single: {concurrency: [1]}
hypotheses:
  - name: a
    flags: {cuda-graph-max-bs: 128}
"""


def test_default_playbooks_validate():
    for p in (ROOT / "playbooks").glob("*.yaml"):
        pb = load_playbook(p)
        assert pb.workloads and pb.name


def _problems(text: str) -> list[str]:
    with pytest.raises(UserError) as exc:
        parse_playbook_text(text, "pb.yaml")
    return exc.value.lines


def test_misspelled_field_suggests_the_right_one_with_its_line():
    lines = _problems(GOOD.replace("    flags:", "    flgas:"))
    assert lines == ["pb.yaml:6: hypotheses[0].flgas: unknown field 'flgas' (fix: did you mean 'flags'?)"]


def test_wrong_type_names_field_line_and_fix():
    text = GOOD + "verdict:\n  repeats: {min: two}\n"
    (line,) = _problems(text)
    assert line.startswith("pb.yaml:8: verdict.repeats.min:") and "whole number" in line


def test_a_request_count_that_does_not_evaluate_at_a_level_is_refused_at_load():
    """`requests_per_level` is an expression in C: it must give at least one request at
    every level of the workload, or the playbook is refused before any server starts."""
    text = GOOD.replace("single: {concurrency: [1]}", 'single: {concurrency: [1, 4], requests_per_level: "C +"}')
    (line,) = _problems(text)
    assert line.startswith("pb.yaml:3: workloads.single.requests_per_level: cannot evaluate 'C +'"), line
    assert "(fix: an integer or an expression in C" in line
    text = GOOD.replace("single: {concurrency: [1]}", 'single: {concurrency: [1, 4], requests_per_level: "C - 2"}')
    (line,) = _problems(text)
    assert line == (
        "pb.yaml:3: workloads.single.requests_per_level: 'C - 2' gives -1 requests at C=1 (fix: at least 1)"
    ), line
    text = GOOD.replace("single: {concurrency: [1]}", 'single: {concurrency: [1, 4], requests_per_level: "1e308 * C"}')
    (line,) = _problems(text)
    assert line == (
        "pb.yaml:3: workloads.single.requests_per_level: '1e308 * C' gives inf requests at C=4 "
        '(fix: an expression with a finite value, such as "2*C")'
    ), line
    text = GOOD.replace(
        "single: {concurrency: [1]}", 'single: {concurrency: [1], requests_per_level: "((8**8)**8)**8"}'
    )
    (line,) = _problems(text)
    assert "cannot evaluate '((8**8)**8)**8' (int too large to convert to float)" in line, line
    ok = GOOD.replace(
        "single: {concurrency: [1]}", 'single: {concurrency: [1, 4], requests_per_level: "C * ceil(6 / C)"}'
    )
    assert parse_playbook_text(ok, "pb.yaml").workloads["single"].requests_per_level == "C * ceil(6 / C)"


def test_two_workloads_with_the_same_prompts_are_refused_at_load():
    """A launch sweeps its workloads one after another on one server: the second would be
    served the first's prompts from the prefix cache and read fast."""
    two = GOOD.replace(
        "single: {concurrency: [1]}",
        "short: {concurrency: [1, 4], prompts: diverse, output_tokens: 64}\n"
        "  long: {concurrency: [1, 4], prompts: diverse, output_tokens: 512}",
    )
    (line,) = _problems(two)
    # at 'long' (line 4), the entry to fix, not at the first workload
    assert line.startswith("pb.yaml:4: workloads.long: 'short' and 'long' send the same diverse prompts (seed 0, "), (
        line
    )
    assert line.endswith("(fix: give 'long' another seed)"), line
    (line,) = _problems(
        two.replace("prompts: diverse, output_tokens: 64", "prompts: p.jsonl, output_tokens: 64").replace(
            "prompts: diverse, output_tokens: 512", "prompts: p.jsonl, output_tokens: 512"
        )
    )
    assert "the same prompts file p.jsonl" in line and line.endswith("(fix: give 'long' its own prompts file)"), line
    assert line.startswith("pb.yaml:4: workloads.long: "), line
    ok = two.replace("output_tokens: 512}", "output_tokens: 512, seed: 1}")
    assert list(parse_playbook_text(ok, "pb.yaml").workloads) == ["short", "long"]
    fixed = two.replace("prompts: diverse", "prompts: fixed")  # one cached prompt by design
    assert len(parse_playbook_text(fixed, "pb.yaml").workloads) == 2


def test_malformed_yaml_gives_line():
    (line,) = _problems("name: t\nworkloads: [\n")
    assert line.startswith("pb.yaml:") and "malformed YAML" in line


def test_duplicate_hypothesis_and_several_problems_listed():
    text = GOOD + "  - name: a\n"
    (line,) = _problems(text)
    assert "duplicate hypothesis name 'a'" in line
    many = _problems("name: t\nworkloads: {}\nbudget: {max_experiments: 0, max_hourz: 3}\n")
    assert len(many) == 3


def test_flag_the_server_template_cannot_take():
    text = GOOD + "server:\n  allowed_flags: [mem-fraction-static]\n"
    (line,) = _problems(text)
    assert "cuda-graph-max-bs" in line and "allowed_flags" in line


def test_missing_patch_file(tmp_path):
    p = tmp_path / "pb.yaml"
    p.write_text(GOOD + "  - name: b\n    patch: patches/nope.diff\n")
    with pytest.raises(UserError) as exc:
        load_playbook(p)
    assert "patch file 'patches/nope.diff' not found" in exc.value.lines[0]


def test_overrides_validate_and_apply():
    pb = parse_playbook_text(GOOD)
    assert apply_overrides(pb, {"node.cuda": "13.0"}).node.cuda == "13.0"
    with pytest.raises(UserError, match="node.cudaa"):
        apply_overrides(pb, {"node.cudaa": "13.0"})


def test_cli_validate_exit_status_and_one_line(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(GOOD.replace("name: t", "nmae: t"))
    r = subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", "validate", str(p)], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert f"{p}:1: nmae: unknown field 'nmae' (fix: did you mean 'name'?)" in r.stderr
    ok = subprocess.run(
        [sys.executable, "-m", "campaign.cli.main", "validate", str(ROOT / "playbooks/eagle_verify.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert ok.returncode == 0, ok.stderr


def test_base_env_entries_name_variables_and_never_a_secret():
    (line,) = _problems(GOOD + "server:\n  base_env: [PATH, HF_TOKEN]\n")
    assert line == (
        "pb.yaml:8: server.base_env: 'HF_TOKEN' names a secret, and secrets are never inherited "
        "(fix: remove it; reference the secret in the env instead: HF_TOKEN: ${HF_TOKEN})"
    )
    (line,) = _problems(GOOD + "server:\n  base_env: [PATH, 'bad name']\n")
    assert line.startswith("pb.yaml:8: server.base_env: 'bad name' is not a variable name") and "(fix:" in line
    pb = parse_playbook_text(GOOD + "server:\n  base_env: [PATH, HOME, 'VLLM_*']\n")
    assert pb.server.base_env == ["PATH", "HOME", "VLLM_*"]
    assert parse_playbook_text(GOOD).server.base_env is None  # the default list applies


@pytest.mark.parametrize("name", ["LD_PRELOAD", "PYTHONPATH", "LD_LIBRARY_PATH", "PATH", "NODE_OPTIONS"])
def test_a_variable_that_picks_loaded_code_is_never_a_planner_knob(name: str) -> None:
    (line,) = _problems(GOOD + f"knobs:\n  env:\n    NCCL_ALGO: {{type: str}}\n    {name}: {{type: str}}\n")
    assert line.startswith("pb.yaml:") and f"knobs.env.{name}: {name} chooses the code a process loads" in line
    assert "(fix: remove the knob" in line
    parse_playbook_text(GOOD + "knobs:\n  env:\n    NCCL_ALGO: {type: str}\n", "pb.yaml")  # others stay knobs


def test_a_slurm_node_asking_for_parallel_jobs_is_refused_with_one_line():
    """A slurm node runs one job at a time; a value it would ignore is refused."""
    slurm = "node: {kind: slurm, partition: gpu, max_parallel_jobs: 4}\n"
    (line,) = _problems(GOOD + slurm)
    assert line.startswith("pb.yaml:7: node.max_parallel_jobs:") and "one job at a time" in line
    assert "nodes:" in line  # the fix names the way to run experiments at once
    parse_playbook_text(GOOD + slurm.replace("4", "1"), "pb.yaml")  # 1 (the default) is what it does
