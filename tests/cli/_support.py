"""Helpers for the CLI tests: run the real console script and the worker, damage stores."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs

HERE = Path(__file__).parent
WORKER = HERE / "incident_worker.py"
ACTOR = "incident-7"
#: The console script installed next to this interpreter (the real entry point).
SCRIPT = Path(sys.executable).parent / "actorlog"


@attrs.frozen
class Run:
    code: int
    out: str
    err: str

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


def cli(
    *args: str | os.PathLike[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> Run:
    """Run the real ``actorlog`` console script."""
    cmd = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "actorlog.cli._main"]
    full_env = {**os.environ, "NO_COLOR": "", "COLUMNS": "200", **(env or {})}
    p = subprocess.run(
        [*cmd, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env=full_env,
        cwd=cwd,
    )
    return Run(p.returncode, p.stdout, p.stderr)


def worker(*args: str | os.PathLike[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKER), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )


def start_crash_run(db: Path, calls: Path) -> subprocess.Popen[str]:
    """Start the crash run and return once ``page_oncall`` blocks (its intent is durable)."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(db), "crash", str(calls)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "BLOCKED":
            return proc
    _, err = proc.communicate(timeout=10)
    raise AssertionError(f"worker exited {proc.returncode} before blocking: {err}")


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def copy_store(src: Path, dst_dir: Path) -> Path:
    """Copy a SQLite store with its WAL files (the crash leaves them un-checkpointed)."""
    dst = dst_dir / src.name
    for suffix in ("", "-wal", "-shm"):
        f = Path(str(src) + suffix)
        if f.exists():
            shutil.copyfile(f, Path(str(dst) + suffix))
    return dst


def entries(db: Path, actor: str = ACTOR) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return list(
            conn.execute(
                "SELECT seq, kind, type_tag, ref FROM entries WHERE actor_id = ? ORDER BY seq",
                (actor,),
            )
        )


def flip_byte(db: Path, seq: int, offset: int = 5, actor: str = ACTOR) -> None:
    """Damage one entry's payload in place, the way a bad disk block would."""
    conn = sqlite3.connect(db)
    try:
        (payload,) = conn.execute(
            "SELECT payload FROM entries WHERE actor_id = ? AND seq = ?", (actor, seq)
        ).fetchone()
        data = bytearray(payload)
        data[offset] ^= 0x01
        conn.execute(
            "UPDATE entries SET payload = ? WHERE actor_id = ? AND seq = ?",
            (bytes(data), actor, seq),
        )
        conn.commit()
    finally:
        conn.close()
