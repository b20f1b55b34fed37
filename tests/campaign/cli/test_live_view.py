"""The live view says where the run is: the hypothesis, round k of at most N, the last
level's figures (tok/s, TTFT p50), node time used and what max_hours leaves; not on a
terminal it prints whole lines (a log is never hard-wrapped)."""

from __future__ import annotations

import io
import time

from rich.console import Console

from campaign.cli.live import LiveView
from campaign.domain.models import LevelResult, Stat
from tools.loadgen.sweep import ProgressEvent


def test_a_round_line_gives_k_of_n_the_last_level_and_the_time_left() -> None:
    buf = io.StringIO()
    live = LiveView(console=Console(file=buf, width=40, color_system=None))  # a pipe: not a terminal
    live("campaign", {"id": "c", "max_rounds": 6, "max_hours": 48, "time_scale": 1.0, "node_seconds": 6840.0})
    live("hypothesis", {"name": "eagle3", "attempt": 1, "rationale": "fewer target steps " * 5})
    live("sweep", {"label": "eagle3-candidate-r0", "workload": "parallel"})
    level = LevelResult(concurrency=70, requests=70, output_tokens_per_s=578.25, ttft_ms=Stat(p50=311.6))
    live("level", {"event": ProgressEvent("measure", 70, 5, 8, 35, 70, 0)})
    live("level", {"event": ProgressEvent("level_done", 70, 5, 8, 70, 70, 0, level)})
    live("round", {"round": 1, "hypothesis": "eagle3", "more": True})
    live.close()
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2, lines  # the hypothesis and the round, each whole although wider than 40
    assert "fewer target steps " * 4 in lines[0]
    round_line = lines[1]
    assert "round 1 (at most 6) of eagle3 measured: another round" in round_line
    assert "last level candidate parallel C=70: 578.2 tok/s, TTFT p50 312 ms" in round_line
    assert "node time about 1h 54m of 48h (about 46h 06m left)" in round_line


def test_the_status_line_names_the_round_in_hand_and_node_time() -> None:
    live = LiveView(console=Console(file=io.StringIO(), width=200, color_system=None))
    live("campaign", {"max_rounds": 6, "max_hours": 2, "time_scale": 1.0, "node_seconds": 3600.0})
    live("hypothesis", {"name": "smaller-cuda-graph", "attempt": 1, "rationale": ""})
    live("round", {"round": 2, "hypothesis": "smaller-cuda-graph", "more": True})
    live.t0 = time.monotonic() - 600  # ten minutes into this process
    text = live.where().plain
    assert text.startswith("smaller-cuda-graph · round 3 of at most 6 · node time about 1h 10m of 2h")
    assert "(about 50m 00s left)" in text
