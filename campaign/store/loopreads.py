"""Store methods for what the loop reads around every verdict, at a cost that does not
grow with the campaign (a week-long campaign reaches thousands of experiments, and a
read per experiment made each experiment dearer than the one before).

A mixin of `campaign.store.Store`: the kept counts (`campaign.store.tally`) and the
node's recent launches for the noise model, read with bounded queries.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from campaign.store import tally
from campaign.store.db import driver_connection, read_session, write_session
from campaign.store.tally import Tally

__all__ = ["LoopReadsMixin"]

# newest first along ix_experiments_order; stops after `limit` matches
_HISTORY = """
SELECT id, baseline_ref FROM experiments
WHERE campaign_id = ? AND node = ? AND fingerprint_id IS ? AND status != 'stale' AND id != ?
ORDER BY started_at DESC, id DESC LIMIT ?
"""


class LoopReadsMixin:
    _engine: Engine

    def loop_tally(self, campaign_id: str) -> Tally:
        """The loop's kept counts (budget, streaks, node seconds): one row, read after
        every verdict; counted from the records the first time a campaign has none."""
        with read_session(self._engine) as s:
            kept = tally.read(driver_connection(s), campaign_id)
        if kept is not None:
            return kept
        with write_session(self._engine) as s:
            return tally.ensure(driver_connection(s), campaign_id)

    def recount_tally(self, campaign_id: str) -> Tally:
        """The same counts from the records alone (what `loop_tally` must equal)."""
        with read_session(self._engine) as s:
            return tally.recount(driver_connection(s), campaign_id)

    def noise_history(
        self, campaign_id: str, node: str, fingerprint_id: str | None, *, limit: int, exclude: str | None = None
    ) -> list[tuple[str, str | None]]:
        """(id, baseline_ref) of the latest `limit` experiments on `node` in this
        environment that are not stale (nor `exclude`), in start order: whose launches
        the noise model reads."""
        with read_session(self._engine) as s:
            rows = driver_connection(s).execute(_HISTORY, (campaign_id, node, fingerprint_id, exclude or "", limit))
            return [(i, ref) for i, ref in reversed(rows.fetchall())]
