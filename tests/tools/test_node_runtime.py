"""The engine profile is the one source of what a node launches: its command, its
environment defaults, its health path and its metrics reader (a real simulated node)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from campaign.domain.models import EffectiveConfig, WorkloadSpec
from tests.canned_http import CannedHandler, serving
from tools.engines import engine_profile
from tools.engines.base import EngineMetrics
from tools.engines.simulated import PROFILE as SIMULATED
from tools.executors.local import LocalExecutor
from tools.node_runtime import NodeRuntime

FAST = "{python} -m tools.simnode --host {host} --port {port} --model {model} --time-scale 40 --seed 3 {flags}"


def _runtime(tmp_path: Path, **profile_update: object) -> NodeRuntime:
    profile = SIMULATED.model_copy(update={"command": FAST, **profile_update})
    return NodeRuntime(
        "sim",
        LocalExecutor(),
        model="simulated-glm",
        workdir=str(tmp_path),
        profile=profile,
        fmt={"python": sys.executable, "host": "127.0.0.1"},
    )


WL = [WorkloadSpec(name="single", concurrency=[1], output_tokens=16, requests_per_level=2, prompt_tokens=32)]


def test_the_profile_gives_the_command_and_its_env_defaults_reach_the_server(tmp_path: Path) -> None:
    node = _runtime(tmp_path, env_defaults={"NCCL_MIN_NCHANNELS": "2"})  # no command from the playbook
    m = node.measure(EffectiveConfig(), WL, label="profile-env")
    assert m.failure is None, m.failure
    assert "-m tools.simnode" in m.command and "--time-scale 40" in m.command
    assert m.reported is not None and m.reported.env.get("NCCL_MIN_NCHANNELS") == "2"  # what the server itself says
    assert m.time_scale == pytest.approx(40.0)  # read through the profile's metrics reader


def test_the_config_overrides_a_profile_default(tmp_path: Path) -> None:
    node = _runtime(tmp_path, env_defaults={"NCCL_MIN_NCHANNELS": "2"})
    m = node.measure(EffectiveConfig(env={"NCCL_MIN_NCHANNELS": "4"}), WL, label="override")
    assert m.failure is None and m.reported is not None and m.reported.env["NCCL_MIN_NCHANNELS"] == "4"


def test_a_playbook_command_overrides_the_profile(tmp_path: Path) -> None:
    profile = SIMULATED.model_copy(update={"command": "{python} -c 'raise SystemExit(3)'"})
    node = NodeRuntime(
        "sim",
        LocalExecutor(),
        model="simulated-glm",
        workdir=str(tmp_path),
        profile=profile,
        command=FAST,
        fmt={"python": sys.executable, "host": "127.0.0.1"},
    )
    assert node.measure(EffectiveConfig(), WL, label="override-cmd").failure is None


def test_accept_length_per_window_follows_each_engines_definition() -> None:
    before = EngineMetrics(engine="x", spec_drafts=10, spec_accepted_tokens=20)
    after = EngineMetrics(engine="x", spec_drafts=30, spec_accepted_tokens=50)
    # vLLM counts accepted draft tokens only: the bonus token adds one per verify step
    assert engine_profile("vllm").accept_length_between(before, after) == pytest.approx(1 + 30 / 20)
    # the simulated node (SGLang-style) counts every emitted token
    assert SIMULATED.accept_length_between(before, after) == pytest.approx(30 / 20)
    assert SIMULATED.accept_length_between(None, after) is None
    assert SIMULATED.accept_length_between(after, after) is None  # nothing drafted in the window


class QueuedLocal(LocalExecutor):
    """A local executor whose jobs wait in a (pretend) scheduler queue before they run."""

    QUEUE_S = 1.5

    def start(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        import time

        time.sleep(self.QUEUE_S)
        return super().start(*args, **kwargs)

    def queue_wait_s(self, handle: object) -> float:
        return self.QUEUE_S


def test_a_scheduler_queue_wait_is_recorded_apart_from_node_time(tmp_path: Path) -> None:
    profile = SIMULATED.model_copy(update={"command": FAST.replace("--time-scale 40", "--time-scale 1")})
    node = NodeRuntime(
        "slurmish",
        QueuedLocal(),
        model="simulated-glm",
        workdir=str(tmp_path),
        profile=profile,
        fmt={"python": sys.executable, "host": "127.0.0.1"},
    )
    m = node.measure(EffectiveConfig(), WL, label="queued")
    assert m.failure is None
    assert m.queue_seconds == pytest.approx(1.5)
    assert m.node_seconds == pytest.approx(m.wall_seconds - 1.5, abs=0.01)


class _EveryOtherFails(CannedHandler):
    """Completions alternate: a 503, then a short SSE stream (a server shedding load)."""

    count = 0

    def do_GET(self) -> None:
        self.send(200, json.dumps({"data": [{"id": "m"}]}).encode())

    def do_POST(self) -> None:
        self.read_body()
        type(self).count += 1
        if type(self).count % 2:
            self.send(503, b'{"error": "overloaded"}')
            return
        events = [{"choices": [{"index": 0, "text": "x"}]}] * 4 + [{"choices": [], "usage": {"completion_tokens": 4}}]
        body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
        self.send(200, body, "text/event-stream")


def test_a_sweep_on_the_node_with_failed_requests_is_a_result_with_errors(tmp_path: Path) -> None:
    """`campaign bench` exits 2 when requests fail (after writing its JSON): the sweep the
    node ran is still the launch's result, whose errors the triage reads, not a crash of
    the load generator."""
    node = _runtime(tmp_path)
    wl = WorkloadSpec(name="parallel", concurrency=[1, 2], output_tokens=4, requests_per_level=4, warmup_requests=0)
    with serving(_EveryOtherFails) as port:
        res = node._sweep_on_node(port, wl, 1.0, 10.0, "flaky")
    assert [lv.errors for lv in res.levels] == [2, 2] and [lv.requests for lv in res.levels] == [4, 4]
    assert "503" in res.levels[0].error_samples[0]
    # exit 2 with no JSON written (a bad argument: bench refuses before any request) is a failed sweep
    with pytest.raises(
        RuntimeError, match=r"load sweep on node sim failed \(exit 2\): campaign bench: --time-scale: must be > 0"
    ):
        node._sweep_on_node(9, wl, 0.0, 10.0, "flaky")


OLD_BENCH = """import json, subprocess, sys
argv = sys.argv[1:]
rc = subprocess.call([{python!r}] + argv)
if "--json" in argv:  # `campaign bench`; anything else (the server) runs as it is
    out = argv[argv.index("--json") + 1]
    data = json.load(open(out))
    data.pop("protocol", None)  # JSON of a campaign from before the prompt cursor
    json.dump(data, open(out, "w"))
sys.exit(rc)
"""


def test_a_node_whose_load_generator_hands_out_prompts_otherwise_is_refused(tmp_path: Path) -> None:
    """The node's own `campaign bench` (an older install) writes JSON without the
    protocol: its sweep is other work than this controller compares, so the launch
    stops with one line naming the node and the fix, not a figure to compare."""
    from campaign.domain.errors import UserError
    from campaign.domain.work import MEASUREMENT_PROTOCOL

    script = tmp_path / "old_python.py"
    script.write_text(OLD_BENCH.format(python=sys.executable))
    wrapper = tmp_path / "old-python"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    wrapper.chmod(0o755)
    wl = WorkloadSpec(name="parallel", concurrency=[1], output_tokens=4, requests_per_level=2, warmup_requests=0)
    node = _runtime(tmp_path)
    with serving(_EveryOtherFails) as port:
        assert node._sweep_on_node(port, wl, 1.0, 10.0, "today").protocol == MEASUREMENT_PROTOCOL
        node.fmt["python"] = str(wrapper)
        with pytest.raises(
            UserError,
            match=rf"node sim: its campaign's load generator hands out prompts by protocol "
            rf"1, this controller's by {MEASUREMENT_PROTOCOL}: .* \(fix: install this "
            rf"campaign version on the node for {wrapper}, then campaign resume\)",
        ):
            node._sweep_on_node(port, wl, 1.0, 10.0, "old")


def test_the_refusal_stops_the_launch_and_its_server(tmp_path: Path) -> None:
    """Through `measure` (sweep_on: node): the refusal is not taken for a server that
    broke (a dead end with evidence); it stops the run, and the server with it."""
    import subprocess

    from campaign.domain.errors import UserError

    script = tmp_path / "old_python.py"
    script.write_text(OLD_BENCH.format(python=sys.executable))
    wrapper = tmp_path / "old-python"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    wrapper.chmod(0o755)
    profile = SIMULATED.model_copy(update={"command": FAST})
    node = NodeRuntime(
        "sim",
        LocalExecutor(),
        model="simulated-glm",
        workdir=str(tmp_path),
        profile=profile,
        fmt={"python": str(wrapper), "host": "127.0.0.1"},
        sweep_on="node",
    )
    with pytest.raises(UserError, match="hands out prompts by protocol 1"):
        node.measure(EffectiveConfig(), WL, label="old-node")
    left = subprocess.run(["pgrep", "-f", f"{script}.*tools.simnode"], capture_output=True, text=True).stdout
    assert left == "", left


def test_a_fingerprint_command_that_fails_is_a_node_error(tmp_path: Path) -> None:
    """An interpreter the node user cannot run (seen on a real ssh node: exit 126): the
    composition root prints it as one line (`campaign.cli.runner`), so it must be a
    NodeError, not any RuntimeError."""
    from tools.executors.base import NodeError

    node = NodeRuntime(
        "sim",
        LocalExecutor(),
        model="m",
        workdir=str(tmp_path),
        profile=SIMULATED,
        fmt={"python": sys.executable},
        fingerprint_argv=["sh", "-c", "echo denied >&2; exit 126"],
    )
    with pytest.raises(NodeError, match=r"node sim: the fingerprint command failed \(exit 126\): denied"):
        node.fingerprint()
