"""The *work* a sweep puts on a server, as one hash: what two measurements must share to
be compared, recorded with every level.

A prompt-set hash alone does not say it: the same prompts sent with another output
length, other request counts, to the other endpoint, or handed out in another order (a
prefix cache serves a prompt it has read before faster) are other work.  So the stored
key covers all of them:

* the prompt set's hash (its content and order),
* `MEASUREMENT_PROTOCOL`: how the load generator hands the prompts out,
* the workload's output tokens, endpoint, warm-up requests and the requests of each
  concurrency level (which also fixes which prompts each level gets).

A campaign that outlives a change of any of them (the playbook edited between runs,
or `campaign` upgraded across a protocol change) does not compare across it: an
experiment whose launches did not all run the same work is not a result
(`campaign.verdict.gates.same_work`), the node's noise model and drift check read only
launches of the work the playbook asks for now, and the campaign measures its baseline
again (`campaign.loop.work_check`).
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel

from campaign.domain.models import SweepResult, WorkloadSpec
from campaign.domain.request_count import requests_for_level

__all__ = ["MEASUREMENT_PROTOCOL", "Work", "sweep_work", "work_of"]

#: How a sweep hands out its prompts.  1: every level started again at prompt 0 (so a
#: level re-sent the prompts of the levels before it; results recorded before
#: 2026-12-06 and `campaign bench` JSON without a `protocol` field); 2: one cursor runs
#: on across the sweep's levels, warm-ups included (`tools/loadgen/sweep.py`).
MEASUREMENT_PROTOCOL = 2


class Work(BaseModel):
    """Everything about a sweep's requests that changes what the server is asked to do."""

    protocol: int
    prompts: str  # the prompt set's hash
    output_tokens: int
    endpoint: str
    warmup_requests: int
    requests: dict[int, int]  # concurrency -> requests measured at that level

    @property
    def key(self) -> str:
        """16 hex digits, stable across runs and machines."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def differences(self, other: Work) -> list[str]:
        """What differs from `other` (this one second), in words: 'output_tokens 256 -> 512'."""
        out = []
        for name in Work.model_fields:
            a, b = getattr(other, name), getattr(self, name)
            if a != b:
                if name == "requests":
                    a = ",".join(f"C={c}:{n}" for c, n in sorted(a.items()))
                    b = ",".join(f"C={c}:{n}" for c, n in sorted(b.items()))
                out.append(f"{name} {a} -> {b}")
        return out


def work_of(workload: WorkloadSpec, prompt_set_hash: str, protocol: int = MEASUREMENT_PROTOCOL) -> Work:
    """The work a sweep of `workload` over the prompt set `prompt_set_hash` does."""
    return Work(
        protocol=protocol,
        prompts=prompt_set_hash,
        output_tokens=workload.output_tokens,
        endpoint=workload.endpoint,
        warmup_requests=workload.warmup_requests,
        requests={c: requests_for_level(workload.requests_per_level, c) for c in workload.concurrency},
    )


def sweep_work(sweep: SweepResult) -> Work | None:
    """The work a finished sweep did, from what it says of itself (its workload, prompt
    set and protocol); None for a sweep that does not name its workload."""
    if sweep.workload is None:
        return None
    return work_of(sweep.workload, sweep.prompt_set_hash, sweep.protocol)
