"""What every playbook model shares: strict fields, and how a validator names the entry
it found a problem in.

Every model forbids unknown fields so that a misspelled key is an error with a
suggestion (see `campaign.playbook.load`), never a silently ignored setting.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ProblemAt", "Scalar", "Strict", "env_values_to_str"]

Scalar = str | int | float | bool | None


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProblemAt(ValueError):
    """A problem a validator finds in one entry below the field it checks: `at` is the
    rest of its location (`campaign.playbook.load` reports that entry's line)."""

    def __init__(self, message: str, *at: str | int) -> None:
        super().__init__(message)
        self.at = at


def env_values_to_str(v: object) -> object:
    """YAML reads `NCCL_MIN_NCHANNELS: 2` as an int; the environment only has strings."""
    if isinstance(v, dict):
        return {k: (str(x).lower() if isinstance(x, bool) else str(x)) for k, x in v.items()}
    return v
