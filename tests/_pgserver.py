"""A PostgreSQL server of a test's own, which the test may crash (SIGKILL) and restart.

The shared test server (``.ci/pg.sh``) runs with ``fsync=off`` and
``synchronous_commit=off``: fine for tests that kill the *client*, useless for one that kills
the *server*, which could lose commits it acknowledged. This one runs with both on, in a
fresh data directory, as a child process of the test (no ``pg_ctl``: the test reaps the
postmaster itself, so a stale ``postmaster.pid`` never names a zombie), and ``crash()``
SIGKILLs the postmaster and every backend at once (one process group), as a power cut or an
OOM kill of the whole server would. ``start()`` again runs PostgreSQL's crash recovery.

Needs PostgreSQL's server binaries (``.ci/pg.sh`` installs Debian's). Without them the test
skips, except under CI, where it fails.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from tests import _pg

__all__ = ["CrashableServer"]


def _bindir() -> str | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda d: int(d.split("/")[-2]) if d.split("/")[-2].isdigit() else 0,
    )
    for d in reversed(found):
        if os.access(os.path.join(d, "postgres"), os.X_OK):
            return d
    on_path = shutil.which("postgres")
    return os.path.dirname(on_path) if on_path else None


def _children(ppid: int) -> list[int]:
    """The pids whose parent is ``ppid`` (from /proc)."""
    out = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[1]) == ppid:
            out.append(int(stat.split("/")[2]))
    return out


class CrashableServer:
    """A private PostgreSQL server (durable settings) on a free loopback port."""

    def __init__(self) -> None:
        bindir = _bindir()
        if bindir is None:
            reason = "server-crash tests need PostgreSQL's server binaries (source .ci/pg.sh)"
            _pg.unavailable(reason, "CI must install them (.ci/pg.sh does).")
        self.bindir = bindir
        root = os.getuid() == 0
        # as root, in /tmp: the postgres user must be able to reach it
        self.dir = tempfile.mkdtemp(prefix="actorlog-pgcrash.", dir="/tmp" if root else None)
        # PostgreSQL refuses to run as root: run it as the postgres user (exec, not fork,
        # so the child we wait for is the postmaster itself)
        self._as: list[str] = []
        if root:
            self._as = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]
            shutil.chown(self.dir, "postgres")
        os.chmod(self.dir, 0o700)
        self._run("initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "--no-sync")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> str:
        return os.path.join(self.dir, "data")

    @property
    def log(self) -> str:
        return os.path.join(self.dir, "log")

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self._as, os.path.join(self.bindir, tool), *args],
            cwd=self.dir,
            check=True,
            capture_output=True,
        )

    def start(self, timeout: float = 60.0) -> None:
        """Start (after a crash: recover) and wait until it accepts connections."""
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen(
                [
                    *self._as,
                    os.path.join(self.bindir, "postgres"),
                    "-D",
                    self.data,
                    "-p",
                    str(self.port),
                    "-k",
                    self.dir,
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "fsync=on",
                    "-c",
                    "synchronous_commit=on",
                    "-c",
                    "max_connections=100",
                ],
                cwd=self.dir,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            isready = os.path.join(self.bindir, "pg_isready")
            ready = subprocess.run(
                [isready, "-q", "-h", "127.0.0.1", "-p", str(self.port)], check=False
            )
            if ready.returncode == 0:
                return
            if self._proc.poll() is not None or time.monotonic() > deadline:
                with open(self.log, errors="replace") as f:
                    tail = f.read()[-3000:]
                raise RuntimeError(f"PostgreSQL did not start:\n{tail}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Shut down cleanly (SIGINT: PostgreSQL's fast shutdown, which ends with a
        checkpoint: every page is in the data files)."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGINT)
        self._proc.wait(timeout=60)
        self._proc = None

    def crash(self) -> None:
        """SIGKILL every server process, backends first, so no backend finishes a commit
        after the kill (backends run in sessions of their own: killing the postmaster's
        group would leave them to notice its death and exit cleanly). Reap the postmaster."""
        assert self._proc is not None
        pm = self._proc.pid
        os.kill(pm, signal.SIGSTOP)  # no new backends while we collect them
        for pid in _children(pm):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.kill(pm, signal.SIGKILL)
        self._proc.wait()
        self._proc = None

    def destroy(self) -> None:
        if self._proc is not None:
            self.crash()
        shutil.rmtree(self.dir, ignore_errors=True)
