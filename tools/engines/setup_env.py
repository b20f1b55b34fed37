"""Where `scripts/setup_vllm_cpu.sh` put the engine's venv and the models: it writes
KEY=VALUE lines to `.campaign/vllm.env` (or $CAMPAIGN_VLLM_ENV)."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from campaign.domain.models import EffectiveConfig

DEFAULT_ENV_FILE = ".campaign/vllm.env"

#: what the CPU build of vLLM needs besides the user's flags, spelled out where it is used
#: (playbooks/vllm_cpu.yaml says the same in its baseline): a float32 model, a 1 GiB KV
#: cache, no download, no usage report, a loopback address for its workers
CPU_FLAGS: dict[str, str] = {"dtype": "float32"}
CPU_ENV: dict[str, str] = {
    "VLLM_HOST_IP": "127.0.0.1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
}


class VllmSetup(BaseModel):
    """The paths of a finished setup."""

    python: str
    model_medium: str
    model_tiny: str
    cache_root: str
    source: str = ""  # the engine's source as a git repository (server.source); "" before the setup made it

    def cpu_config(self, config: EffectiveConfig) -> EffectiveConfig:
        """`config` on this CPU build: its flags and env over what the build needs."""
        return EffectiveConfig(
            flags={**CPU_FLAGS, **config.flags}, env={**CPU_ENV, "VLLM_CACHE_ROOT": self.cache_root, **config.env}
        )


def env_file_path(root: str | Path = ".") -> Path:
    return Path(os.environ.get("CAMPAIGN_VLLM_ENV") or Path(root) / DEFAULT_ENV_FILE)


def read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def read_vllm_setup(root: str | Path = ".") -> VllmSetup | None:
    """The setup's paths, or None when the setup has not run here (or its venv or a
    model has gone since)."""
    path = env_file_path(root)
    if not path.is_file():
        return None
    v = read_env_file(path)
    try:
        setup = VllmSetup(
            python=v["CAMPAIGN_VLLM_PYTHON"],
            model_medium=v["CAMPAIGN_VLLM_MODEL_MEDIUM"],
            model_tiny=v["CAMPAIGN_VLLM_MODEL_TINY"],
            cache_root=v.get("VLLM_CACHE_ROOT", str(Path(root) / ".campaign/vllm-cache")),
            source=v.get("CAMPAIGN_VLLM_SOURCE", ""),
        )
    except KeyError:
        return None
    paths_exist = Path(setup.python).exists() and all(
        (Path(m) / "config.json").is_file() for m in (setup.model_medium, setup.model_tiny)
    )
    return setup if paths_exist else None
