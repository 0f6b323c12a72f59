"""A full disk said in one line that names the fix, by every CLI command and in the bot's log (issue 33).

The disk fills under any of personae's writers: PostgreSQL (its error `disk_full`, SQLSTATE 53100, or an
I/O error whose text says "No space left on device"), Qdrant Edge (an OSError, or a Rust error with that
text), a log or an export file (an OSError with errno ENOSPC or EDQUOT). Each is found down the chain of
what wrapped it (SQLAlchemy wraps the driver's error twice), and said as where to free space.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path

_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_DISK_FULL_SQLSTATE = "53100"
_TEXTS = ("no space left on device", "disk quota exceeded")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The error, what it wraps (`orig`), what it was raised from or while handling, innermost last."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)
        todo += [e for e in (orig, current.__cause__, current.__context__) if isinstance(e, BaseException)]
        if isinstance(current, BaseExceptionGroup):
            todo += list(current.exceptions)


def _full_disk(exc: BaseException) -> tuple[bool, str | None, bool]:
    """Whether the error is a full disk, the file it was writing when it says, and whether PostgreSQL
    said it (the error carries a SQLSTATE)."""
    chain = list(_chain(exc))
    from_database = any(getattr(cause, "sqlstate", None) for cause in chain)
    for cause in chain:
        if isinstance(cause, OSError) and cause.errno in _ERRNOS:
            return True, os.fsdecode(cause.filename) if cause.filename else None, from_database
        text = str(cause).lower()
        if getattr(cause, "sqlstate", None) == _DISK_FULL_SQLSTATE or any(t in text for t in _TEXTS):
            return True, None, from_database
    return False, None, False


def disk_full_message(exc: BaseException, data_dir: Path, *, database_url: bool) -> str | None:
    """One line for a full disk (None when the error is something else): where to free space, then to
    try again. It names the file the error names, else the data directory (the embedded PostgreSQL's
    and the index's home); a database at DATABASE_URL full on its own server is said as such."""
    full, written, from_database = _full_disk(exc)
    if not full:
        return None
    if written is None and from_database and database_url:
        return (
            "The database server's disk is full (No space left on device): free space on the server of "
            "DATABASE_URL, then try again."
        )
    where = Path(written) if written else data_dir
    return f"The disk is full (No space left on device): free space on {_disk_of(where)}, then try again."


def _disk_of(path: Path) -> str:
    """`the disk holding PATH` (PATH the data directory or the file), with its mount point when that
    is not the root: what `df` would name."""
    path = path.expanduser().absolute()
    mount = path
    while not os.path.ismount(mount) and mount.parent != mount:
        mount = mount.parent
    where = f"the disk holding {path}"
    return where if str(mount) in ("/", str(path)) else f"{where} (mounted at {mount})"


class DiskFullLog(logging.Filter):
    """The bot's (and the worker's) log: a record of an error that is a full disk becomes the one line,
    at ERROR, without its traceback; what wrote it (the logger, the message) stays at the front."""

    def __init__(self, data_dir: Path, *, database_url: bool) -> None:
        super().__init__()
        self._data_dir = data_dir
        self._database_url = database_url

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:
            return True
        said = disk_full_message(exc, self._data_dir, database_url=self._database_url)
        if said is not None:
            record.msg = f"{record.getMessage()}: {said}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.ERROR, "ERROR"
        return True
