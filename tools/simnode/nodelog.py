"""SGLang-shaped log lines on stdout: `[YYYY-mm-dd HH:MM:SS TP0] message`.

The launcher appends stdout to the run's log artifact and triage reads it, so lines
are flushed one by one (a crash must not lose the evidence)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class NodeLog:
    def __init__(self, stream: TextIO | None = None, tp_size: int = 8) -> None:
        self.stream = stream or sys.stdout
        self.tp_size = tp_size

    def line(self, message: str, *, rank: int | None = None) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        where = f"{stamp} TP{rank}" if rank is not None else stamp
        for part in message.split("\n"):
            self.stream.write(f"[{where}] {part}\n")
        self.stream.flush()

    def raw(self, message: str) -> None:
        """Uvicorn-style lines (no bracket prefix)."""
        self.stream.write(message + "\n")
        self.stream.flush()

    def all_ranks(self, message: str) -> None:
        for r in range(self.tp_size):
            self.line(message, rank=r)
