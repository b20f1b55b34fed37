"""The SQLite record: one `Store` facade over small repositories.

`Store` is imported on first use (PEP 562) so that read-only commands such as
`campaign status` can use `campaign.store.quick` without loading sqlmodel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from campaign.store.facade import Store

__all__ = ["Store"]


def __getattr__(name: str) -> Any:
    if name == "Store":
        from campaign.store.facade import Store

        return Store
    raise AttributeError(f"module 'campaign.store' has no attribute {name!r}")
