"""Errors a user can fix.  The CLI prints each as one line and exits 2, no traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input: a file, a field, a flag, an id.  `lines` are printed one per line."""

    exit_code = 2

    def __init__(self, *lines: str) -> None:
        self.lines = [ln for ln in lines if ln]
        super().__init__("\n".join(self.lines))


class CampaignLocked(UserError):
    """Another process is running this campaign."""
