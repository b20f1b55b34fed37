from __future__ import annotations

import struct
from pathlib import Path

from campaign.domain.records import CampaignView
from campaign.journal.plots import OVERVIEW_KEY, render_plots
from tests.campaign.seed_campaign import CID, seed_view

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plots_for_multi_level_experiments_and_overview(tmp_path):
    out = tmp_path / "journal" / "j.plots"
    made = render_plots(seed_view(), out)
    assert made == {f"{CID}/eagle3#2": "j.plots/exp-eagle3-2.png", OVERVIEW_KEY: "j.plots/campaign-overview.png"}
    for rel in made.values():
        path = tmp_path / "journal" / rel
        width, height = png_size(path)
        assert 300 <= width <= 1200 and 200 <= height <= 600
        assert 5_000 < path.stat().st_size < 300_000
    assert sorted(p.name for p in out.iterdir()) == ["campaign-overview.png", "exp-eagle3-2.png"]  # no temp files


def test_no_plot_for_failed_launches_or_single_level_runs(tmp_path):
    view = seed_view()
    crashed_and_single = [e for e in view.experiments if e.id != f"{CID}/eagle3#2"]
    made = render_plots(view.model_copy(update={"experiments": crashed_and_single}), tmp_path / "p")
    assert set(made) == {OVERVIEW_KEY}


def test_plots_are_deterministic(tmp_path):
    """Their speed is bench/scale.py's to measure (README "Scale"), not a timed test's."""
    view = seed_view()
    first = render_plots(view, tmp_path / "a", relative_to=tmp_path)
    second = render_plots(view, tmp_path / "b", relative_to=tmp_path)
    for key in first:
        assert (tmp_path / first[key]).read_bytes() == (tmp_path / second[key]).read_bytes()


def test_empty_campaign_makes_no_plots(tmp_path):
    view = CampaignView(id="c", name="empty", status="running")
    assert render_plots(view, tmp_path / "p") == {}
