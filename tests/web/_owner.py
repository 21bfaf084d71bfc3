"""A runtime owning actor ``job-1`` on a PostgreSQL store, in another process
(``tests/cli/lifecycle_worker.py pg-own``): its step ``Slow`` blocks in a write tool until
an operator cancels or terminates it through the store's inbox."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

from tests.web._serve import ROOT


class Owner:
    def __init__(self, url: str, schema: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.cli.lifecycle_worker", "pg-own", url, schema],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )

    def line(self) -> str:
        """Its next line: ``in-tool``, ``outcome TYPE``, ``after VALUE-OR-TYPE``."""
        assert self.proc.stdout is not None
        got = self.proc.stdout.readline().strip()
        if not got:
            _, err = self.proc.communicate(timeout=10)
            raise AssertionError(f"the owner ended ({self.proc.returncode}): {err}")
        return got

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for s in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if s is not None and not s.closed:
                s.close()


@contextlib.contextmanager
def owning(url: str, schema: str) -> Iterator[Owner]:
    """The owner, once its step is in the tool (``in-tool``); closed at the end."""
    o = Owner(url, schema)
    try:
        assert o.line() == "in-tool"
        yield o
    finally:
        o.close()
