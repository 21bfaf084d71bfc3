"""The one-writer lock of a file store (docs/FORMAT.md [F14]): an exclusive ``flock`` on a
lock file beside the database, holding a JSON note of who holds it."""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys

from actorlog.store import StoreLockedError, StoreUnavailableError

try:
    import fcntl
except ImportError:  # Windows: no flock; the one-writer lock is not taken (documented)
    fcntl = None  # type: ignore[assignment]

__all__ = ["AVAILABLE", "release", "take"]

#: False where there is no ``flock`` (Windows): stores then take no lock.
AVAILABLE = fcntl is not None


def take(db_path: str, lock_path: str) -> int:
    """Lock ``lock_path`` (created if missing, never deleted) for writing ``db_path`` and
    write who holds it; return the descriptor that holds the lock.

    Raises:
        StoreLockedError: another process holds it (named in the error).
        StoreUnavailableError: the lock file cannot be created.
    """
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreUnavailableError(f"cannot create the lock file {lock_path}: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            holder = _describe_holder(os.pread(fd, 4096, 0))
        finally:
            os.close(fd)
        raise StoreLockedError(os.path.abspath(db_path), holder) from None
    me = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "argv": " ".join(sys.argv)[:200],
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(me).encode(), 0)
    return fd


def release(fd: int) -> None:
    """Drop the lock: closing the only descriptor drops the flock."""
    os.close(fd)


def _describe_holder(raw: bytes) -> str:
    """``pid P on host H since T`` from a lock file's contents (best effort)."""
    try:
        info = json.loads(raw.decode("utf-8"))
        return f"pid {info['pid']} on host {info['host']} since {info['since']} ({info['argv']})"
    except (ValueError, KeyError, TypeError):
        return "holder unknown: it is starting, or wrote no details"
