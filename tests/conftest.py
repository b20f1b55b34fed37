"""Session-wide test setup."""

from __future__ import annotations

import signal


def pytest_configure() -> None:
    """A shell without job control starts a background command (`pytest ... &`) with SIGINT
    ignored, and every process it starts inherits that: the tests that press Ctrl-C on a
    `campaign` command would then find it deaf to it (as it should be, started that way).
    Restore the default, so their commands start as from a terminal however pytest ran."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
