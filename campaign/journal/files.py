"""The journal's files: replaced atomically, so a killed render never leaves half a
journal, and the temp files a killed write left removed on the next start."""

from __future__ import annotations

import glob
import os
import tempfile
from pathlib import Path

from campaign.domain.errors import UserError

__all__ = ["clean_temp_files", "write_journal"]


def write_journal(path: str | os.PathLike[str], text: str) -> Path:
    """Replace `path` atomically: temp file in the same directory, fsync, os.replace."""
    target = Path(path)
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        tmp = None
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        raise UserError(
            f"{target}: cannot write the journal ({exc.strerror or exc}) "
            f"(fix: make {target.parent} writable, or set `journal:` in the playbook "
            "to a writable path)"
        ) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return target


def clean_temp_files(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temp files a killed journal or plot write left (`.<name>.md.<random>.tmp`
    beside the journal, `.<plot>.png.tmp` in its plot folder).  Call it only while no
    other process renders this journal (under the run lock)."""
    target = Path(path)
    found = [
        *target.parent.glob(f".{glob.escape(target.name)}.*.tmp"),
        *(target.parent / f"{target.stem}.plots").glob(".*.tmp"),
    ]
    removed = []
    for tmp in found:
        try:
            tmp.unlink()
            removed.append(tmp)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise UserError(
                f"{tmp}: cannot remove a temp file left by an interrupted journal write "
                f"({exc.strerror or exc}) (fix: make {tmp.parent} writable)"
            ) from None
    return removed
