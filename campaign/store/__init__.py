"""The SQLite record: one `Store` facade over small repositories."""

from campaign.store.facade import Store

__all__ = ["Store"]
