"""The node's fingerprint carries the engine's installed version on every executor kind
(local, ssh, Slurm), read with the interpreter the launch command runs: an upgraded
engine is a new environment, and a dead end "revisit when engine_version changes" can
only fire where the version is known.  Before, a real node's fingerprint left it empty
("was unknown" in the journal) and an upgrade went unseen."""

from __future__ import annotations

from pathlib import Path

from tools.engines import engine_profile
from tools.executors.base import Executor
from tools.node_runtime import NodeRuntime


def install(executor: Executor, tmp_path: Path, node_dir: str, version: str) -> str:
    """A real installed distribution on the node: `engx-server` installs package `engx`."""
    site = tmp_path / f"site-{version}"
    (site / "engx").mkdir(parents=True)
    (site / "engx" / "__init__.py").write_text("raise SystemExit('the probe must not import the engine')\n")
    info = site / "engx_server-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: engx-server\nVersion: {version}\n")
    (info / "top_level.txt").write_text("engx\n")
    executor.run(["rm", "-rf", f"{node_dir}/site"], timeout=30)
    executor.put(str(site), f"{node_dir}/site")
    return f"{node_dir}/site"


def runtime(executor: Executor, node_dir: str, command: str) -> NodeRuntime:
    profile = engine_profile("vllm").model_copy(update={"package": "engx"})
    return NodeRuntime(
        "n", executor, model="m", fmt={"python": "python3"}, workdir=node_dir, profile=profile, command=command
    )


def test_fingerprint_reads_the_engines_installed_version_and_sees_an_upgrade(
    executor: Executor, tmp_path: Path, node_dir: str
) -> None:
    site = install(executor, tmp_path, node_dir, "1.4.2")
    node = runtime(
        executor,
        node_dir,
        f"env PYTHONPATH={site} HF_TOKEN=hf_not_for_the_probe "
        "{python} -u -m engx.entrypoints.api_server --port {port} {flags}",
    )
    before = node.fingerprint()
    assert (before.engine, before.engine_version) == ("vllm", "1.4.2")
    install(executor, tmp_path, node_dir, "1.5.0rc1")
    after = node.fingerprint()
    assert after.engine_version == "1.5.0rc1"
    changed = {k for k, v in after.components().items() if before.components().get(k) != v}
    assert changed == {"engine_version"}


def test_a_command_without_a_findable_interpreter_leaves_the_version_unknown(executor: Executor, node_dir: str) -> None:
    fp = runtime(executor, node_dir, "/opt/start-engine.sh --port {port} {flags}").fingerprint()
    assert (fp.engine, fp.engine_version) == ("vllm", "")
