"""Engine code a patch hypothesis changes (`playbooks/simnode_patch.yaml`).

The simulated node runs from the tree the campaign gives it (`PYTHONPATH={source}`),
so a patch to this file is how the patch path is shown end to end: the step-time
factor is what the node's performance model multiplies every scheduler step by, and
`PATCH_BANNER`, when set, is logged at start-up: the log proves which tree ran.
"""

from __future__ import annotations

#: every scheduler step's duration is multiplied by this (a faster kernel: < 1)
STEP_TIME_FACTOR = 1.0

#: logged at start-up when not empty
PATCH_BANNER = ""
