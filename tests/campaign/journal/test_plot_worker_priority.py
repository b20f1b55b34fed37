"""Plot workers draw at the lowest CPU priority: they run while the loop measures the next
experiment, and CPU they take from the server or the load generator is noise in the figures."""

from __future__ import annotations

import os

from campaign.journal import plot_worker


def test_plot_workers_run_at_nice_19() -> None:
    pool = plot_worker._get_pool()
    nices = {pool.submit(os.nice, 0).result(timeout=120) for _ in range(2 * plot_worker._workers())}
    assert nices == {19}
    assert os.nice(0) < 19  # the controller (and the servers it starts) keep their priority
