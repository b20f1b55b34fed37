"""`campaign validate` (and `run`) refuse what would fail or measure nothing: a missing or
malformed prompts file, a `server.python` that is not on this machine, a revisit condition
no fingerprint has, a `depends_on` naming no hypothesis, a hypothesis whose launch is the
baseline's.  Each is one line naming file, line, field and fix, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.campaign.cli.test_cli_errors import cli, one_line_error, table_counts

BASE = """\
name: refuse
journal: {tmp}/journal/j.md
node: {{kind: local}}
server:
  engine: vllm
  model: some/model
baseline:
  flags: {{max-num-seqs: 8, enforce-eager: true}}
  env: {{OMP_NUM_THREADS: "2"}}
workloads:
  w:
    concurrency: [1]
    prompts: fixed
    output_tokens: 8
    requests_per_level: 2
hypotheses:
  - name: smaller-batch
    flags: {{max-num-seqs: 4}}
"""

CASES = [
    (
        "prompts_missing",
        ("    prompts: fixed", "    prompts: data/none.jsonl"),
        (":13:", "workloads.w.prompts", "data/none.jsonl", "not found"),
    ),
    (
        "prompts_malformed",
        ("    prompts: fixed", "    prompts: bad.jsonl"),
        (":13:", "workloads.w.prompts", "line 2", "not valid JSON"),
    ),
    (
        "python_missing",
        ("  model: some/model", "  model: some/model\n  python: /no/such/venv/bin/python"),
        (":7:", "server.python", "/no/such/venv/bin/python", "not an executable"),
    ),
    (
        "revisit_unknown",
        ("    flags: {max-num-seqs: 4}", "    flags: {max-num-seqs: 4}\n    revisit_on: [cuda, vllm_version]"),
        (":19:", "hypotheses[0].revisit_on[1]", "'vllm_version'", "did you mean 'engine_version'?"),
    ),
    (
        "depends_unknown",
        ("    flags: {max-num-seqs: 4}", "    flags: {max-num-seqs: 4}\n    depends_on: [smaller-batc]"),
        (":19:", "hypotheses[0].depends_on[0]", "'smaller-batc'", "did you mean 'smaller-batch'?"),
    ),
    (
        "false_flag",
        ("    flags: {max-num-seqs: 4}", "    flags: {enable-prefix-caching: false}"),
        (
            ":17:",
            "hypotheses[0] (smaller-batch)",
            "enable-prefix-caching: false emits no flag",
            "no-enable-prefix-caching: true",
        ),
    ),
    (
        "same_value",
        ("    flags: {max-num-seqs: 4}", '    flags: {max-num-seqs: "8"}'),
        (":17:", "hypotheses[0]", "already the baseline's"),
    ),
    (
        "unset_absent",
        ("    flags: {max-num-seqs: 4}", "    unset_flags: [max-model-len]"),
        (":17:", "hypotheses[0]", "unset_flags max-model-len is not in the baseline"),
    ),
    (
        "same_env",
        ("    flags: {max-num-seqs: 4}", "    env: {OMP_NUM_THREADS: 2}"),
        (":17:", "hypotheses[0]", "env OMP_NUM_THREADS is already the baseline's"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_validate_refuses(tmp_path: Path, case: tuple[str, tuple[str, str], tuple[str, ...]]) -> None:
    name, (old, new), needles = case
    text = BASE.format(tmp=tmp_path)
    assert old in text
    (tmp_path / "bad.jsonl").write_text('{"prompt": "hello"}\nnot json\n')
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace(old, new, 1))
    one_line_error(cli("validate", path.name, cwd=tmp_path), f"{name}.yaml", *needles)


def test_run_refuses_before_recording(tmp_path: Path) -> None:
    text = BASE.format(tmp=tmp_path).replace(
        "    flags: {max-num-seqs: 4}", "    flags: {enable-prefix-caching: false}"
    )
    (tmp_path / "p.yaml").write_text(text)
    db = tmp_path / "state" / "campaign.db"
    one_line_error(cli("run", "p.yaml", "--db", str(db), cwd=tmp_path), "p.yaml:17:", "emits no flag")
    assert not db.exists() or sum(v for v in table_counts(db).values() if isinstance(v, int)) == 0


def test_what_does_change_the_launch_validates(tmp_path: Path) -> None:
    """Turning off a flag the baseline sets is a change; so is a patch (its code differs)."""
    text = BASE.format(tmp=tmp_path).replace("    flags: {max-num-seqs: 4}", "    flags: {enforce-eager: false}")
    (tmp_path / "p.yaml").write_text(text)
    res = cli("validate", "p.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stderr


def test_remote_python_is_named_not_skipped(tmp_path: Path) -> None:
    text = (
        BASE.format(tmp=tmp_path)
        .replace("node: {kind: local}", "node: {kind: ssh, host: gpu-box}")
        .replace("  model: some/model", "  model: some/model\n  python: /opt/venv/bin/python")
    )
    (tmp_path / "p.yaml").write_text(text)
    res = cli("validate", "p.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "not checked here: /opt/venv/bin/python on ssh gpu-box" in res.stdout


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("hypotheses:\n  - name: added\n    flags: {enable-prefix-caching: false}\n", 2),
        ("- name: first\n  flags: {max-num-seqs: 2}\n- name: added\n  env: {OMP_NUM_THREADS: '2'}\n", 3),
    ],
)
def test_resume_refuses_an_added_hypothesis_that_launches_the_baseline(tmp_path: Path, text: str, line: int) -> None:
    """`resume --add-hypothesis FILE` is checked as the playbook's hypotheses are, before anything is recorded."""
    from campaign.playbook.load import load_playbook
    from campaign.store import Store

    pb_path = tmp_path / "p.yaml"
    pb_path.write_text(BASE.format(tmp=tmp_path))
    db = tmp_path / "state" / "campaign.db"
    with Store(db) as store:
        cid = store.create_campaign("refuse", playbook=load_playbook(pb_path), playbook_path=str(pb_path)).id
    (tmp_path / "more.yaml").write_text(text)
    before = table_counts(db)
    one_line_error(
        cli("resume", cid, "--db", str(db), "--add-hypothesis", "more.yaml", cwd=tmp_path),
        f"more.yaml:{line}:",
        "added",
        "launches exactly the baseline's",
    )
    assert table_counts(db) == before
