"""What `nvidia-smi` and version probes would report on the simulated node."""

from __future__ import annotations

import socket

from campaign.domain.models import Fingerprint
from tools.simnode.profiles import CudaStack, Profile

ENGINE = "sglang-sim"


def build_fingerprint(profile: Profile, stack: CudaStack) -> Fingerprint:
    extra = {k: v for k, v in stack.versions.items() if k != "sglang"}
    extra["profile"] = profile.name
    return Fingerprint(
        gpu=profile.gpu,
        gpu_count=profile.gpu_count,
        arch=profile.arch,
        driver=profile.driver,
        cuda=stack.cuda,
        engine=ENGINE,
        engine_version=stack.versions.get("sglang", ""),
        engine_sha="",
        interconnect=profile.interconnect,
        host=socket.gethostname(),
        extra=extra,
    )
