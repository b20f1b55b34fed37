"""The plot queue's bookkeeping: a finished plot leaves it by itself, a failed one stays
until `wait_idle` raises its error."""

from __future__ import annotations

import contextlib
import time

import pytest

from campaign.journal import plot_worker
from campaign.journal.format import plot_workloads
from tests.campaign.seed_campaign import CID, seed_view


@pytest.fixture(autouse=True)
def _drained():
    """Start from an empty queue: a plot an earlier test submitted and never waited for
    (a failed one stays queued until `wait_idle`) is not this test's."""
    with contextlib.suppress(Exception):
        plot_worker.wait_idle(timeout=120)
    yield


def _settle(timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while plot_worker.outstanding() and time.monotonic() < end:
        time.sleep(0.05)


def test_a_finished_plot_leaves_the_queue_without_another_submit(tmp_path):
    # before: every submit scanned the whole queue to drop finished plots (quadratic over a
    # full render), and the last plots stayed queued until some later submit
    exp = next(e for e in seed_view().experiments if e.id == f"{CID}/eagle3#2")
    for i in range(3):
        plot_worker.submit("experiment", (exp, plot_workloads(exp)), tmp_path / f"p{i}.png")
    _settle()
    assert not plot_worker._pending and not plot_worker._paths
    assert not plot_worker.is_pending(tmp_path / "p2.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p0.png", "p1.png", "p2.png"]


def test_a_failed_plot_stays_until_wait_idle_raises_it(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    exp = next(e for e in seed_view().experiments if e.id == f"{CID}/eagle3#2")
    plot_worker.submit("experiment", (exp, plot_workloads(exp)), blocked / "p.png")
    _settle()
    assert len(plot_worker._pending) == 1 and not plot_worker._paths
    with pytest.raises(OSError):
        plot_worker.wait_idle(timeout=120)
    assert not plot_worker._pending
