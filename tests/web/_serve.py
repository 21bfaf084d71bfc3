"""``actorlog serve`` and the live worker as real processes, for the HTTP and browser tests."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import attrs

from tests.cli._support import SCRIPT

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@attrs.frozen
class Served:
    base: str
    banner: list[str]
    proc: subprocess.Popen[str]


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@contextlib.contextmanager
def serve(db: Path | str, *args: str, host: str = "127.0.0.1") -> Iterator[Served]:
    """Run ``actorlog serve DB ARGS`` on a free port of ``host`` until the block ends (then
    Ctrl-C); ``db`` a SQLite file or a store URL."""
    port = free_port()
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "actorlog.cli._main"]
    proc = subprocess.Popen(
        [*cmd, "serve", str(db), "--port", str(port), "--host", host, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stderr is not None
        banner: list[str] = []
        base = f"http://{host}:{port}"
        for line in proc.stderr:
            banner.append(line.rstrip("\n"))
            if line.startswith(("read-only", "  http://")):
                break
        else:
            raise AssertionError(f"actorlog serve exited {proc.wait()}: {banner}")
        _wait_listening(host, port, proc)
        yield Served(base, banner, proc)
    finally:
        _stop(proc)


def _wait_listening(host: str, port: int, proc: subprocess.Popen[str]) -> None:
    for _ in range(200):
        if proc.poll() is not None:
            raise AssertionError(f"actorlog serve exited {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.05)
    raise AssertionError("actorlog serve did not start listening")


class LiveWorker:
    """``tests/web/worker.py DB live``: a runtime holding the SQLite file; ``ask()`` makes
    it handle one more message and returns once the step is durable."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.web.worker", str(db), "live"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.n = 0
        self._expect("READY")

    def _expect(self, want: str) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != want:
            err = self.proc.stderr.read() if self.proc.stderr and self.proc.poll() else ""
            raise AssertionError(f"worker said {line!r}, expected {want!r}: {err}")

    def ask(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        self.n += 1
        self._expect(f"DONE {self.n}")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@contextlib.contextmanager
def live_worker(db: Path) -> Iterator[LiveWorker]:
    w = LiveWorker(db)
    try:
        yield w
    finally:
        w.close()
