"""Record files are the user's alone (0600): the database, the checkpoints, the run
ledger and the journal's index hold every measurement, command and review note.

SQLite gives a database's `-wal`/`-shm`/`-journal` files the main file's mode, so the
main file is created 0600 before SQLite opens it; an existing one (an older run's) is
tightened, as are the side files it already has.  No link is followed.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["private_file"]

_SIDE = ("-wal", "-shm", "-journal")


def private_file(path: Path | str) -> Path:
    """Create `path` 0600 if absent, make it (and its SQLite side files) 0600 if not."""
    target = Path(path)
    for p in (target, *(target.with_name(target.name + s) for s in _SIDE)):
        flags = os.O_WRONLY | os.O_NOFOLLOW | (os.O_CREAT if p == target else 0)
        try:
            fd = os.open(p, flags, 0o600)
        except FileNotFoundError:
            continue
        except OSError:
            if p == target:
                raise
            continue
        with contextlib.suppress(OSError):  # not ours to change: SQLite will say what is wrong
            os.fchmod(fd, 0o600)
        os.close(fd)
    return target
