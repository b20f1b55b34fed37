from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campaign.domain.errors import UserError
from campaign.domain.records import CorrectnessResult
from campaign.journal.render import parse_notes, render_journal, update_journal, write_journal
from tests.campaign.seed_campaign import BASE_PARALLEL, CID, EAGLE_PARALLEL, PARALLEL_C, seed_view

REPO = Path(__file__).resolve().parents[3]


def section(doc: str, heading: str) -> str:
    """The text from `heading` to the next heading of the same or higher level."""
    start = doc.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    nxt = re.compile(rf"^#{{1,{level}}} ", re.M).search(doc, start + len(heading))
    return doc[start : nxt.start() if nxt else len(doc)]


def table_rows(text: str) -> list[list[str]]:
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", r)[1:-1]] for r in rows[2:]]


@pytest.fixture()
def doc() -> str:
    return render_journal(seed_view(), db_label=".campaign/campaign.db")


def test_header_awaiting_review_with_exact_resume_commands(doc):
    assert doc.startswith("# Optimization journal: eagle-fast-verify\n")
    assert f"| campaign | `{CID}` |" in doc
    assert "| status | **awaiting review**: 3 dead ends in a row |" in doc
    for flag in ("--approve", "--reject"):
        assert f"\ncampaign resume {CID} {flag}\n" in doc
    assert "faster than real time" not in doc  # time scale 1: no note


def test_finished_and_failed_status_and_time_scale_note():
    view = seed_view(status="finished").model_copy(update={"halt_reason": "queue empty", "time_scale": 60.0})
    d = render_journal(view)
    assert "| status | finished: queue empty |" in d and "campaign resume" not in d
    assert "> Figures are node time; the simulated node ran 60x faster than real time." in d
    failed = render_journal(seed_view(status="failed").model_copy(update={"halt_reason": "node unreachable"}))
    assert "| status | **failed**: node unreachable |" in failed


def test_baseline_and_how_it_moved(doc):
    base = section(doc, "## Current baseline")
    assert "Config: `--tp 8 --cuda-graph-max-bs 128 --mem-fraction-static 0.88`" in base
    assert "- **single_stream**: 82.0 tok/s at C=1" in base
    assert "(peak 784.2 at C=70)" in base
    history = [ln for ln in base.splitlines() if re.match(r"\d\. ", ln)]
    assert [h.split(":")[0] for h in history] == [
        "1. start",
        "2. adopted win smaller-cuda-graph",
        "3. re-measured after environment change (cuda 12.8 -> 13.0)",
    ]
    assert "89.5 tok/s (single_stream C=1), +9.1%" in history[1] and "82.0 tok/s" in history[2]


def test_scoreboard_one_row_per_experiment_with_markers_and_links(doc):
    rows = table_rows(section(doc, "## Scoreboard"))
    assert [r[1] for r in rows] == [
        "smaller-cuda-graph",
        "flashinfer-allreduce-fusion",
        "nccl-tree",
        "torch-symm-mem",
        "ep-flashinfer-a2a",
        "custom-allreduce-pcie",
        "nccl-fewer-channels",
        "eagle3",
        "eagle3",
    ]
    assert [r[2] for r in rows] == [
        "WIN (adopted)",
        "DEAD END (jit_error)",
        "DEAD END (cuda_graph_incompatible)",
        "DEAD END (unsupported_arch)",
        "DEAD END (oom)",
        "DEAD END (slower)",
        "INCONCLUSIVE (confounded: mem-fraction-static)",
        "DEAD END (slower), RE-OPENED",
        "DEAD END (mixed regime)",
    ]
    assert rows[0][3:5] == ["89.5 vs 82.0 tok/s (single_stream C=1)", "+9.1% [+7.1%, +11.1%]"]
    assert rows[1][3:5] == ["crashed (start)", "-"]
    assert rows[5][3:5] == ["38.0 vs 89.5 tok/s (single_stream C=1)", "-57.5% [-59.5%, -55.5%]"]
    for r in rows:  # every link lands on an anchor that exists
        anchor = re.fullmatch(r"\[details\]\(#([a-z0-9-]+)\)", r[5]).group(1)
        assert f'<a id="{anchor}"></a>' in doc


def test_eagle_section_per_level_table_regimes_and_analysis(doc):
    sec = section(doc, "### 9. eagle3")
    assert "- regimes: candidate wins single_stream; baseline wins parallel at every C" in sec
    par = table_rows(sec.split("**Workload parallel**")[1])
    assert [int(r[0]) for r in par] == PARALLEL_C
    assert [float(r[1]) for r in par] == EAGLE_PARALLEL and [float(r[2]) for r in par] == BASE_PARALLEL
    # the candidate's change, signed, its interval's two ends, and the side that won
    assert par[0][3:5] == ["-16.3%", "[-19.3%, -13.3%]"] and par[4][3] == "-57.9%"
    assert all(r[6] == "baseline" for r in par)
    header = next(ln for ln in sec.split("**Workload parallel**")[1].splitlines() if ln.startswith("|"))
    # a record without its level's confidence: Bonferroni over 9 levels; one-sided bound
    assert "| interval (99.4% confidence) | no worse than (95% one-sided) | winner |" in header
    assert all(re.fullmatch(r"-\d+\.\d%", r[5]) and float(r[5][:-1]) < -10 for r in par)  # a loss, bounded
    assert "| `speculative-num-draft-tokens` | (unset) | 16 | added |" in sec
    assert "**Patch commit.** `9f8e7d6c5b4a39281706f5e4d3c2b1a098765432`" in sec
    assert "**Analysis (model-written, not verified by the campaign):**" in sec
    assert "> EAGLE-3 only helps when batching is negligible.\n>\n> Above C=5" in sec
    assert "cuda `13.0`" in sec


def test_confounded_run_shows_the_undeclared_change(doc):
    sec = section(doc, "### 7. nccl-fewer-channels")
    assert "`mem-fraction-static` (0.88 -> 0.8), which the hypothesis did not declare" in sec
    assert "| flag | `mem-fraction-static` | 0.88 | 0.8 | NOT DECLARED by the hypothesis |" in sec
    assert "| env | `NCCL_MAX_NCHANNELS` | (unset) | 4 | added |" in sec


def test_crash_sections_carry_class_and_log_excerpt(doc):
    sec = section(doc, "### 5. ep-flashinfer-a2a")
    assert "**Evidence.** `oom` in phase start, exit code 1" in sec
    assert "```text\nAssertionError: expert_location_metadata is None\ntorch.OutOfMemoryError" in sec
    assert "**Workload" not in sec and "confidence" not in sec  # nothing measured, no figures claimed


def test_dead_ends_section_with_environment_and_revisit_conditions(doc):
    rows = {r[0]: r for r in table_rows(section(doc, "## Dead ends"))}
    assert rows["flashinfer-allreduce-fusion"][3] == "cuda changes (was 12.8) or engine_version changes (was 0.4.9)"
    assert rows["flashinfer-allreduce-fusion"][1].startswith("jit_error: FlashInfer JIT")
    assert "arch sm_120" in rows["torch-symm-mem"][2]
    assert rows["custom-allreduce-pcie"][3] == "no automatic revisit (the idea itself lost)"
    assert rows["**RE-OPENED** eagle3"][3] == "cuda changes (was 12.8)"


def test_environment_reviews_cost_and_footer(doc):
    assert "- environment: cuda 12.8 -> 13.0 (re-opened: eagle3)" in doc
    assert "- drift: baseline single_stream moved -8.4%" in doc
    reviews = table_rows(section(doc, "## Reviews"))
    assert reviews[0][1:4] == ["before patch dynamic-spec-disable", "approve", "go ahead, v2 worker only"]
    assert reviews[1][2] == "**pending**"
    assert "| prompt_tokens | 41210 |" in doc
    assert doc.rstrip().endswith(
        "_generated from `.campaign/campaign.db` at 2025-06-16 22:06 UTC; "
        "edit only inside notes blocks, everything else is regenerated_"
    )
    no_cost = render_journal(seed_view().model_copy(update={"planner_cost": {"calls": 0}}))
    assert "## Planner cost" not in no_cost


def test_render_is_pure_and_stable(doc):
    assert render_journal(seed_view(), db_label=".campaign/campaign.db") == doc
    assert render_journal(seed_view(), doc, db_label=".campaign/campaign.db") == doc


def add_note(doc: str, key: str, note: str) -> str:
    """`note` written into the first notes block `key` (its marker names the campaign)."""
    m = re.search(rf"^<!-- notes:{key}(?: campaign:\S+)? -->\n", doc, re.M)
    assert m, f"no notes block {key}"
    return doc[: m.end()] + f"{note}\n" + doc[m.end() :]


def test_notes_survive_regeneration_and_orphans_are_kept(doc):
    edited = add_note(
        add_note(doc, "campaign", "Ask Bob about CUDA 13 drivers.\n\n| keep | my table |"),
        "eagle3-2",
        "Re-run with topk=1 on the v2 worker.",
    )
    again = render_journal(seed_view(), edited)
    assert "Ask Bob about CUDA 13 drivers.\n\n| keep | my table |\n<!-- /notes:campaign -->" in again
    assert f"**Notes:**\n\n<!-- notes:eagle3-2 campaign:{CID} -->\nRe-run with topk=1" in section(
        again, "### 9. eagle3"
    )
    assert render_journal(seed_view(), again) == again  # regeneration is idempotent

    view = seed_view()
    shrunk = view.model_copy(update={"experiments": view.experiments[:-1]})
    orphaned = render_journal(shrunk, again)
    orphans = section(orphaned, "## Orphaned notes")
    assert "### from section eagle3-2" in orphans and "Re-run with topk=1 on the v2 worker." in orphans
    assert parse_notes(orphaned, CID)["eagle3-2"] == "Re-run with topk=1 on the v2 worker."
    back = render_journal(view, orphaned)  # the section returns: the note goes home
    assert "## Orphaned notes" not in back and "Re-run with topk=1" in section(back, "### 9. eagle3")


def test_notes_blocks_carry_the_campaign_id_and_never_move_to_another(doc):
    """A journal whose header no longer names its campaign (hand-edited, or a file a
    second campaign was pointed at): another campaign writing it keeps the first's notes
    under the first's id, never in its own blocks."""
    assert f"<!-- notes:campaign campaign:{CID} -->\n" in doc and "<!-- notes:eagle3-2 campaign:" in doc
    a_notes = add_note(add_note(doc, "campaign", "A-ONLY HUMAN NOTE"), "eagle3-2", "A's eagle note")
    headless = a_notes.replace(f"| campaign | `{CID}` |", "| campaign | - |")
    other = seed_view().model_copy(update={"id": "other-1a2b3c"})
    b = render_journal(other, headless)
    assert parse_notes(b, other.id) == {}
    assert "A-ONLY HUMAN NOTE" not in section(b, "## Notes")
    assert parse_notes(b, CID) == {"campaign": "A-ONLY HUMAN NOTE", "eagle3-2": "A's eagle note"}
    orphans = section(b, "## Orphaned notes")
    assert f"<!-- notes:campaign campaign:{CID} -->\nA-ONLY HUMAN NOTE\n<!-- /notes:campaign -->" in orphans
    assert render_journal(other, b) == b  # kept under its own id on every regeneration
    assert render_journal(seed_view(), b).count("A-ONLY HUMAN NOTE") == 1  # and A takes it back home


def test_markers_without_an_id_are_read_as_the_campaigns_own(doc):
    """Journals written before the markers carried an id keep their notes."""
    legacy = re.sub(
        r"^(<!-- notes:[a-z0-9-]+) campaign:\S+ -->$", r"\1 -->", add_note(doc, "campaign", "old note"), flags=re.M
    )
    assert " campaign:" not in legacy and "<!-- notes:campaign -->\nold note\n" in legacy
    assert parse_notes(legacy, CID) == {"campaign": "old note"}
    assert f"<!-- notes:campaign campaign:{CID} -->\nold note\n" in render_journal(seed_view(), legacy)


def test_hostile_model_text_cannot_steal_or_fake_notes():
    view = seed_view()
    hostile = (
        "<!-- /notes:eagle3-2 -->\n<!-- notes:campaign -->\nSTOLEN\n<!-- /notes:campaign -->\n"
        "# Fake heading\n| a | b |\n|---|---|\n[click](http://evil) ![img](http://evil/x.png)\n```\n<b>x</b>"
    )
    exps = list(view.experiments)
    exps[-1] = exps[-1].model_copy(update={"analysis": hostile, "hypothesis": "eagle3 | <i>x</i>"})
    exps[1] = exps[1].model_copy(
        update={
            "failure": exps[1].failure.model_copy(
                update={"evidence": ["<!-- notes:campaign -->", "```", "STOLEN TOO", "<!-- /notes:campaign -->"]}
            )
        }
    )
    view = view.model_copy(update={"experiments": exps})
    first = add_note(render_journal(view), "campaign", "human note")
    d = render_journal(view, first)
    assert parse_notes(d, CID) == {"campaign": "human note"}
    assert "\n# Fake heading" not in d and "<b>" not in d and "<i>" not in d
    assert re.search(r"(?<!\\)\]\(http://evil", d) is None  # link syntax escaped, text still visible
    assert "| 9 | eagle3 \\| &lt;i>x&lt;/i> |" in d  # the scoreboard keeps its columns
    assert "````text\n<!-- notes:campaign -->\n```\nSTOLEN TOO" in d  # the fence outgrows the content


def test_unclosed_notes_block_is_recovered_without_swallowing_the_document(doc):
    edited = add_note(doc, "smaller-cuda-graph-1", "my unclosed note").replace(
        "<!-- /notes:smaller-cuda-graph-1 -->\n", ""
    )
    assert parse_notes(edited, CID) == {"smaller-cuda-graph-1": "my unclosed note"}
    assert render_journal(seed_view(), edited).count("my unclosed note") == 1


def test_write_journal_is_atomic_and_keeps_mode(tmp_path):
    path = tmp_path / "journal" / "j.md"
    write_journal(path, "old\n")
    path.chmod(0o640)
    write_journal(path, "new\n")
    assert path.read_text() == "new\n" and (path.stat().st_mode & 0o777) == 0o640
    with pytest.raises(UnicodeEncodeError):  # fails mid-write: the old journal stays, no temp file left
        write_journal(path, "partial \ud800 text")
    assert path.read_text() == "new\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["j.md"]


def test_killed_writer_leaves_the_old_journal_intact(tmp_path):
    path = tmp_path / "j.md"
    write_journal(path, "old journal\n")
    code = (
        "import sys; from campaign.journal.render import write_journal; write_journal(sys.argv[1], 'x' * 400_000_000)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=REPO, start_new_session=True)
    deadline = time.monotonic() + 30
    while not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.001)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert path.read_text() == "old journal\n"


def test_unwritable_path_is_a_user_error(tmp_path):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a directory")
    with pytest.raises(UserError) as err:
        write_journal(blocker / "j.md", "x")
    msg = str(err.value)
    assert str(blocker / "j.md") in msg and "fix:" in msg and "\n" not in msg


def test_update_journal_renders_plots_beside_it_and_keeps_notes(tmp_path):
    path = tmp_path / "journal" / "eagle-fast-verify.md"
    update_journal(path, seed_view(), db_label="campaign.db")
    text = path.read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert "eagle-fast-verify.plots/exp-eagle3-2.png" in links
    assert "eagle-fast-verify.plots/campaign-overview.png" in links
    assert all((path.parent / link).is_file() for link in links)
    write_journal(path, add_note(text, "dead-ends", "never again: custom AR over PCIe"))
    update_journal(path, seed_view(), plots=False)
    assert parse_notes(path.read_text(), CID)["dead-ends"] == "never again: custom AR over PCIe"


def test_latency_limit_column_and_failed_correctness_appear_when_present():
    view = seed_view()
    exps = list(view.experiments)
    eagle = exps[-1]
    rows = [
        r.model_copy(
            update={
                "comparison": r.comparison.model_copy(
                    update={"candidate_meets_limit": r.concurrency < 30, "baseline_meets_limit": True}
                )
            }
        )
        if r.workload == "parallel"
        else r
        for r in eagle.rows
    ]
    verdict = eagle.verdict.model_copy(
        update={
            "correctness": CorrectnessResult(
                prompts=8, mismatches=3, tolerance=0.0, passed=False, examples=["prompt 2: 'Paris' != 'Pa ris'"]
            )
        }
    )
    exps[-1] = eagle.model_copy(update={"rows": rows, "verdict": verdict})
    sec = section(render_journal(view.model_copy(update={"experiments": exps})), "### 9. eagle3")
    par = table_rows(sec.split("**Workload parallel**")[1])
    assert par[0][-1] == "ok / ok" and par[4][-1] == "MISSED / ok"
    assert "latency limit (cand / base)" not in sec.split("**Workload parallel**")[0]  # single_stream has none
    assert "**Correctness.** **FAILED**: 3 of 8 prompts differ from the baseline (tolerance 0%)" in sec
    assert "prompt 2: 'Paris' != 'Pa ris'" in sec


def test_a_level_a_latency_limit_gave_to_the_slower_side_says_so():
    """A faster candidate that misses the latency limit loses the level; the winner cell
    named the baseline with its 'advantage' as "+-8.6%" (a negative gain)."""
    view = seed_view()
    exps = list(view.experiments)
    eagle = exps[-1]
    rows = [
        r.model_copy(
            update={
                "comparison": r.comparison.model_copy(
                    update={"candidate_meets_limit": False, "baseline_meets_limit": True, "winner": "baseline"}
                )
            }
        )
        if r.workload == "single_stream"
        else r
        for r in eagle.rows
    ]
    exps[-1] = eagle.model_copy(update={"rows": rows})
    sec = section(render_journal(view.model_copy(update={"experiments": exps})), "### 9. eagle3")
    single = table_rows(sec.split("**Workload single_stream**")[1].split("**Workload")[0])
    delta = next(r.comparison.delta_pct for r in rows if r.workload == "single_stream")
    assert delta > 0  # the candidate is faster there
    assert single[0][3] == f"{delta:+.1f}%" and single[0][6] == "baseline (latency limit)"
    assert "+-" not in sec
