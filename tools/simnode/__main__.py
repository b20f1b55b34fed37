"""`python -m tools.simnode [sim options] [SGLang flags]` and `... fingerprint`.

Unknown flags are argparse usage errors (exit 2) like on a real server; env vars
(NCCL_*, CUDA_VISIBLE_DEVICES) are read from the process environment."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from campaign.domain.errors import UserError
from tools.simnode.config import add_engine_args, from_namespace
from tools.simnode.fingerprint import build_fingerprint
from tools.simnode.launchnoise import DEFAULT_LAUNCH_OFFSET_PCT
from tools.simnode.profiles import CUDA_STACKS, PROFILES, get_profile, get_stack


def _add_node_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="rtx6000bw-pcie-8x", choices=sorted(PROFILES))
    p.add_argument("--cuda", default="12.8", choices=sorted(CUDA_STACKS))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tools.simnode", description="Simulated SGLang node (OpenAI-compatible HTTP server)."
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    _add_node_args(p)
    p.add_argument("--seed", type=int, default=None, help="noise seed (default: random per launch)")
    p.add_argument("--time-scale", type=float, default=1.0, help="node seconds per wall second")
    p.add_argument("--noise-pct", type=float, default=1.5, help="per-step jitter (%%, seeded)")
    p.add_argument(
        "--launch-offset-pct",
        type=float,
        default=DEFAULT_LAUNCH_OFFSET_PCT,
        help="this launch's speed offset, shared by every level it serves: log-normal with this "
        "spread (%%), drawn afresh at every launch (default %(default)s; 0: none)",
    )
    p.add_argument(
        "--launch-seed",
        type=int,
        default=None,
        help="seed of the launch offset's draw (default, or negative: a fresh draw per launch)",
    )
    p.add_argument("--model", dest="sim_model", default=None, help="model name served (default: the profile's)")
    p.add_argument(
        "--max-events-per-s",
        type=float,
        default=6000.0,
        help="SSE event budget; intermediate tokens coalesce beyond it (first/last never)",
    )
    add_engine_args(p)
    return p


def _fingerprint(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.simnode fingerprint")
    _add_node_args(p)
    ns = p.parse_args(argv)
    print(build_fingerprint(get_profile(ns.profile), get_stack(ns.cuda)).model_dump_json(indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    from tools.simnode.server import NodeOptions, serve

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["fingerprint"]:
            return _fingerprint(argv[1:])
        ns = build_parser().parse_args(argv)
        if ns.time_scale <= 0:
            raise UserError("--time-scale: must be > 0 (fix: e.g. --time-scale 50)")
        if not 0 <= ns.launch_offset_pct <= 20:
            raise UserError("--launch-offset-pct: must be within 0..20 (fix: e.g. --launch-offset-pct 1.5)")
        cfg = from_namespace(ns, os.environ)
        opts = NodeOptions(
            host=ns.host,
            port=ns.port,
            profile=ns.profile,
            cuda=ns.cuda,
            seed=ns.seed,
            time_scale=ns.time_scale,
            noise_pct=ns.noise_pct,
            model=ns.sim_model,
            launch_offset_pct=ns.launch_offset_pct,
            launch_seed=ns.launch_seed if ns.launch_seed is not None and ns.launch_seed >= 0 else None,
            max_events_per_s=ns.max_events_per_s,
        )
        return asyncio.run(serve(opts, cfg))
    except SystemExit as exc:  # argparse usage errors: exit 2 like a real server
        return exc.code if isinstance(exc.code, int) else 2
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
