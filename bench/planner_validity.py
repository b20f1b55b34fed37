"""What share of a served model's proposals pass the planner's validation, with and without
the JSON-schema constraint.

Asks the model for N proposals in each mode through the real `LlmPlanner` (one call per
proposal: `max_rejections: 0`; proposal i sampled with seed i at the playbook's temperature)
on the prompt of a campaign's first proposal: the playbook's knob space and baseline, with
the baseline figures of the simulated node's performance model.  With the schema, the request carries `response_format:
json_schema` built from the knob space (knob names as enums, bounds, choices), so an engine
with constrained decoding can only write an answer of that shape; without it, the model is
asked for plain JSON.  Either way every answer goes through the same validation (pydantic,
the knob space, unsafe values, no-op changes), and the refused ones are counted by reason.

    python bench/planner_validity.py --serve            # starts and stops the local vLLM server
    python bench/planner_validity.py --base-url http://127.0.0.1:8011/v1 -n 20

`--serve` needs `scripts/setup_vllm_cpu.sh` and `scripts/setup_planner_model.sh`.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from campaign.domain.models import EffectiveConfig
from campaign.domain.records import BaselineView, CampaignView
from campaign.planner.base import PlannerContext
from campaign.planner.llm import LlmPlanner
from campaign.playbook.load import load_playbook
from campaign.playbook.nodes import SimulatedNodeSpec
from campaign.playbook.schema import Playbook
from tools.executors.registry import install_node_kinds
from tools.planner_model import serve
from tools.simnode.config import EngineConfig
from tools.simnode.perfmodel import expected_output_tps


def baseline_figures(pb: Playbook) -> dict[str, dict[int, float]]:
    """The baseline's output tok/s per workload and concurrency that the prompt shows: the
    simulated node's noise-free performance model for the playbook's baseline and node."""
    node = pb.node
    if not isinstance(node, SimulatedNodeSpec):
        return {}
    config = EngineConfig.from_flags(pb.baseline.flags)
    return {
        name: {
            c: round(
                expected_output_tps(
                    config,
                    node.profile,
                    node.cuda,
                    c,
                    "diverse" if wl.prompts == "diverse" else "fixed",
                    output_tokens=wl.output_tokens,
                    prompt_tokens=wl.prompt_tokens,
                ),
                1,
            )
            for c in wl.concurrency
        }
        for name, wl in pb.workloads.items()
    }


def context(pb: Playbook) -> PlannerContext:
    base = BaselineView(
        experiment_id="b0",
        config=EffectiveConfig(flags=dict(pb.baseline.flags), env=dict(pb.baseline.env)),
        figures=baseline_figures(pb),
    )
    return PlannerContext(playbook=pb, view=CampaignView(id="bench", name=pb.name, status="running", baseline=base))


def reason_kind(reason: str) -> str:
    """A refusal reason without the model's own values, so that like reasons count together."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "X", reason)
    text = re.sub(r"-?\d+(\.\d+)?(e[+-]?\d+)?", "N", text)
    return text.split("; ")[0][:110]


def run_mode(pb: Playbook, base_url: str, structured: bool, n: int) -> tuple[int, Counter[str], float, int]:
    ctx = context(pb)
    valid, refused, seconds, tokens = 0, Counter[str](), 0.0, 0
    for i in range(n):
        # answer i is sampled with seed i: a rerun asks the same N questions, in both modes
        spec = pb.planner.model_copy(update={"structured": structured, "max_rejections": 0, "seed": i})
        planner = LlmPlanner(spec, pb.knobs, base_url=base_url, allowed_flags=pb.server.allowed_flags)
        outcome = planner.propose(ctx)
        for call in outcome.calls:
            seconds += call.latency_ms / 1000
            tokens += call.completion_tokens
        if outcome.hypothesis is not None:
            valid += 1
            h = outcome.hypothesis
            print(f"  {i + 1:2d} valid: {h.name} flags={h.flags} env={h.env} unset={h.unset_flags}", flush=True)
        else:
            errors = [c.error for c in outcome.calls if c.error]
            why = (
                reason_kind(outcome.rejections[0].reason)
                if outcome.rejections
                else (errors[0] if errors else outcome.note)
            )
            refused[why] += 1
            print(
                f"  {i + 1:2d} refused: {outcome.rejections[0].reason if outcome.rejections else why}"[:300], flush=True
            )
    return valid, refused, seconds, tokens


@contextlib.contextmanager
def endpoint(args: argparse.Namespace) -> Iterator[str]:
    if args.base_url:
        yield args.base_url
        return
    with tempfile.TemporaryDirectory(prefix="planner-validity-") as tmp, serve(ROOT, log_dir=Path(tmp)) as server:
        yield server.url.rstrip("/") + "/v1"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--base-url", help="an OpenAI-compatible endpoint serving the playbook's planner.model")
    where.add_argument("--serve", action="store_true", help="start the local vLLM planner server, stop it after")
    ap.add_argument("-n", type=int, default=20, help="proposals asked for in each mode (default 20)")
    ap.add_argument("--playbook", default=str(ROOT / "playbooks/llm_planner_cpu.yaml"))
    args = ap.parse_args()
    install_node_kinds()  # any node kind the playbook names, as the CLI knows them
    pb = load_playbook(args.playbook)
    t0 = time.monotonic()
    with endpoint(args) as base_url:
        rows = []
        for structured in (True, False):
            label = "with the schema (response_format json_schema)" if structured else "without it (plain JSON asked)"
            print(f"{label}:", flush=True)
            valid, refused, seconds, tokens = run_mode(pb, base_url, structured, args.n)
            rows.append((label, valid, refused, seconds, tokens))
    print(
        f"\nmodel {pb.planner.model} at {base_url}, temperature {pb.planner.temperature:g}, "
        f"max_tokens {pb.planner.max_tokens}, {args.n} proposals per mode, {time.monotonic() - t0:.0f} s in all"
    )
    print("| mode | valid | share | s per answer | tokens per answer | refused (count: reason) |")
    print("|---|---|---|---|---|---|")
    for label, valid, refused, seconds, tokens in rows:
        why = "; ".join(f"{c}: {r}" for r, c in refused.most_common()) or "none"
        print(
            f"| {label} | {valid}/{args.n} | {valid / args.n:.0%} | {seconds / args.n:.1f} | {tokens / args.n:.0f} | {why} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
