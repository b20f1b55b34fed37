"""The confound rule on what the servers report (campaign.verdict.confound), with the
simulated node's own reports: its `/server_info` as the engine profile reads it."""

from __future__ import annotations

import json

from campaign.domain.models import EffectiveConfig, ReportedConfig
from campaign.verdict.confound import check
from campaign.verdict.reasons import confound_reason
from tools.engines.simulated import PROFILE
from tools.simnode.config import EngineConfig
from tools.simnode.server import NodeOptions, SimNode

TEMPLATE = {"model-path": "glm-4.6-fp8", "tp": 8, "stream-interval": 8}  # the demo's command template
BASE = EffectiveConfig(flags={"cuda-graph-max-bs": 512, "mem-fraction-static": 0.88})


def reported(config: EffectiveConfig, **drop_or_add: object) -> ReportedConfig:
    """What the simulated node reports for `config` (its real /server_info, read through
    the engine profile); `drop_or_add` edits the flags the server *runs* with: a server
    that ignores a flag (None) or sets one nobody asked for."""
    flags = {**TEMPLATE, **config.flags}
    for key, value in drop_or_add.items():
        key = key.replace("_", "-")
        if value is None:
            flags.pop(key, None)
        else:
            flags[key] = value
    node = SimNode(NodeOptions(seed=7), EngineConfig.from_flags(flags, config.env))
    rep = PROFILE.reported_config(PROFILE.parse_metrics(json.dumps(node.server_info())))
    assert rep is not None
    return rep


def run(
    flags: dict,
    declares: list[str] | None = None,
    env: dict | None = None,
    base: EffectiveConfig = BASE,
    **server: object,
):
    cand = EffectiveConfig(flags={**base.flags, **flags}, env={**base.env, **(env or {})})
    declared = set(declares) if declares is not None else set(flags) | set(env or {})
    return check(base, cand, declared, [(reported(base), reported(cand, **server))])


def test_the_profile_reports_in_the_command_lines_spelling_with_its_derivations():
    rep = reported(BASE)
    assert rep.flags["cuda-graph-max-bs"] == 512 and rep.flags["tp-size"] == 8 and "cuda_graph_max_bs" not in rep.flags
    assert "mem-fraction-static" in rep.derived_from["max-running-requests"]
    assert rep.aliases["tp"] == "tp-size"


def test_an_honoured_flag_is_declared_and_confounds_nothing():
    res = run({"cuda-graph-max-bs": 128})
    assert res.confounded_by == []
    assert [(r.key, r.baseline, r.candidate, r.status) for r in res.reported_diff] == [
        ("cuda-graph-max-bs", 512, 128, "declared")
    ]


def test_derived_settings_follow_from_a_declared_flag():
    # only the algorithm is set: the server fills in the draft shape and, with less KV
    # cache left after the draft model, the request limit
    res = run(
        {"speculative-algorithm": "EAGLE3", "mem-fraction-static": 0.80},
        base=EffectiveConfig(flags={"cuda-graph-max-bs": 512, "mem-fraction-static": 0.88}),
    )
    assert res.confounded_by == []
    status = {r.key: (r.status, r.follows) for r in res.reported_diff}
    assert status["speculative-algorithm"] == ("declared", [])
    assert status["speculative-num-steps"] == ("follows", ["speculative-algorithm"])
    assert status["max-running-requests"][0] == "follows"
    assert set(status["max-running-requests"][1]) == {"mem-fraction-static", "speculative-algorithm"}


def test_a_derived_setting_of_an_undeclared_change_names_only_its_cause():
    # the seeds' confounded run: the memory fraction moved too, and with it the request limit
    res = run({"mem-fraction-static": 0.85}, declares=["NCCL_MIN_NCHANNELS"], env={"NCCL_MIN_NCHANNELS": "2"})
    assert [(c.key, c.reported) for c in res.confounded_by] == [("mem-fraction-static", False)]
    status = {r.key: r.status for r in res.reported_diff}
    # NCCL_MIN_NCHANNELS: only the candidate's server reports it (set on that side alone)
    assert status == {"mem-fraction-static": "undeclared", "max-running-requests": "follows"}
    assert confound_reason(res.confounded_by) == (
        "confounded: mem-fraction-static (0.88 -> 0.85) differs from the baseline but the hypothesis does not "
        "declare it"
    )


def test_a_declared_flag_the_server_ignores_confounds_the_run():
    res = run({"enable-mixed-chunk": True}, enable_mixed_chunk=None)
    (c,) = res.confounded_by
    assert (c.key, c.change, c.reported, c.requested, c.before, c.after) == (
        "enable-mixed-chunk",
        "ignored",
        True,
        True,
        False,
        False,
    )
    (row,) = res.reported_diff
    assert row.status == "ignored" and row.requested is True
    assert confound_reason(res.confounded_by) == (
        "confounded: the server ignored enable-mixed-chunk: asked for true, it reports false as on the baseline"
    )


def test_a_declared_flag_the_server_overrides_confounds_the_run():
    res = run({"chunked-prefill-size": 4096}, chunked_prefill_size=2048)
    assert [(c.key, c.change, c.requested, c.after) for c in res.confounded_by] == [
        ("chunked-prefill-size", "overridden", 4096, 2048)
    ]


def test_an_undeclared_setting_the_server_changes_confounds_the_run():
    # nothing in the request differs but the flag under test; the server also changed the
    # schedule policy: only its report shows it
    res = run({"enable-mixed-chunk": True}, schedule_policy="lpm")
    assert [(c.key, c.before, c.after, c.reported, c.change) for c in res.confounded_by] == [
        ("schedule-policy", "fcfs", "lpm", True, "changed")
    ]
    assert confound_reason(res.confounded_by) == (
        "confounded: the servers report schedule-policy (fcfs -> lpm) differs from the baseline but the "
        "hypothesis does not declare it"
    )


def test_settings_only_one_server_reports_are_not_compared():
    base = ReportedConfig(flags={"a": 1}, env={})
    cand = ReportedConfig(flags={"a": 1, "b": 2}, env={"NCCL_ALGO": "Tree"})
    res = check(EffectiveConfig(), EffectiveConfig(), set(), [(base, cand)])
    assert res.confounded_by == [] and res.reported_diff == []


def test_aliases_match_a_declared_spelling_with_the_reported_one():
    base = ReportedConfig(flags={"tp-size": 8}, aliases={"tp": "tp-size"})
    cand = ReportedConfig(flags={"tp-size": 4}, aliases={"tp": "tp-size"})
    res = check(EffectiveConfig(flags={"tp": 8}), EffectiveConfig(flags={"tp": 4}), {"tp"}, [(base, cand)])
    assert res.confounded_by == [] and [r.status for r in res.reported_diff] == ["declared"]


def test_without_reports_only_the_requested_configs_count():
    res = check(BASE, EffectiveConfig(flags={**BASE.flags, "mem-fraction-static": 0.85}), set())
    assert [c.key for c in res.confounded_by] == ["mem-fraction-static"] and res.reported_diff == []
