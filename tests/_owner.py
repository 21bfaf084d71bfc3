"""A runtime in another process, for the tests of a store that several runtimes share
(PostgreSQL): ``python -m MODULE ARGS...`` started at the repository root, which says where
it is by lines on its stdout, ends when its stdin closes (or gets a line), and can be paused,
resumed and killed with real signals. The ``owner_processes`` fixture (``tests/conftest.py``)
starts them and always reaps them; ``owning`` does the same in a ``with`` block.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.to_thread

ROOT = Path(__file__).resolve().parent.parent

__all__ = ["ROOT", "OwnerProcess", "owning"]


class OwnerProcess:
    """One runtime process (see the module doc)."""

    def __init__(self, module: str, *args: object) -> None:
        self.name = " ".join([module, *map(str, args[:1])])
        # stderr to a file, not a pipe: a chatty worker never blocks on a full pipe; closed
        # by close()
        self._err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *map(str, args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            cwd=ROOT,
        )

    def line(self) -> str:
        """Its next line on stdout (waits for it); AssertionError if it ended instead."""
        assert self.proc.stdout is not None
        got = self.proc.stdout.readline().strip()
        if not got:
            code = self.proc.wait(timeout=10)
            raise AssertionError(f"{self.name} ended ({code}): {self.stderr()}")
        return got

    async def next_line(self, timeout: float = 60) -> str:
        """``line()`` from a thread, at most ``timeout`` seconds."""
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(self.line)

    def stderr(self) -> str:
        self._err.seek(0)
        return self._err.read()

    def pause(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        self.resume()  # a stopped process takes SIGKILL too; resumed, it is reaped at once
        self.proc.kill()
        self.proc.wait()

    def say(self, text: str = "") -> None:
        """Write a line to its stdin (the workers end on one)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    async def wait(self, timeout: float = 30) -> int:
        """Its exit code, once it has ended (at most ``timeout`` seconds)."""
        return await anyio.to_thread.run_sync(functools.partial(self.proc.wait, timeout=timeout))

    def close(self) -> None:
        """End it if it runs (resumed, then its stdin closed: it ends by itself; killed after
        20 s), reap it and close its pipes."""
        if self.proc.poll() is None:
            self.resume()
            with contextlib.suppress(OSError):  # a pipe it closed already
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        for s in (self.proc.stdin, self.proc.stdout):
            if s is not None and not s.closed:
                with contextlib.suppress(OSError):
                    s.close()
        self._err.close()


@contextlib.contextmanager
def owning(module: str, *args: object, ready: str) -> Iterator[OwnerProcess]:
    """An ``OwnerProcess``, once it has printed ``ready``; closed at the end."""
    o = OwnerProcess(module, *args)
    try:
        got = o.line()
        assert got == ready, got
        yield o
    finally:
        o.close()
