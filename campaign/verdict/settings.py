"""Which statistical components the verdict rule uses: one frozen object the rule reads
where each component acts, so that the verdict lab can take each out in turn
(`bench/verdict_lab.py --ablate`) and show what it buys.  The campaign always runs
`SHIPPED` (every component on); no component is switched off by patching the rule."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["COMPONENTS", "SHIPPED", "RuleSettings"]


class RuleSettings(BaseModel):
    """Each field: a component on (True) or left out (False), and what leaving it out means."""

    model_config = ConfigDict(frozen=True)

    #: Holm's step-down over the tests that can declare a winner; off: Bonferroni over all
    #: of them at every step (no decided test frees its share).
    holm: bool = True
    #: error spending over the adaptive policy's looks (win and no-loss tests); off: every
    #: look at the playbook's level.
    spending: bool = True
    #: Cheverud-Nyholt: levels and workloads sharing a launch offset counted as fewer
    #: tests; off: every level of a workload whose levels differ counts as one test.
    cheverud_nyholt: bool = True
    #: the limma-style moderated prior df of the node's noise where it moves between
    #: experiments; off: the node's noise counts at its full df.
    moderated_prior: bool = True
    #: the stall screens (cells and launches replaced or dropped, a disagreeing pair
    #: measured a third time); off: every launch counts as measured.
    stall_screen: bool = True
    #: the baseline-level check (a baseline whose launches all sit far below its recent
    #: level is measured on); off: not checked.
    baseline_level: bool = True
    #: a workload whose levels do not test as different is one common effect; off: every
    #: level is its own test.
    common_effect: bool = True


SHIPPED = RuleSettings()
COMPONENTS = tuple(RuleSettings.model_fields)
