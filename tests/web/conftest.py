"""Fixtures for the console tests: real stores written by real runtimes, the console over
them (Starlette's TestClient, or ``actorlog serve`` as a process), and Chromium."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import _pg
from tests.cli._support import copy_store, kill, start_crash_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    """asyncpg runs on asyncio only; the console is tested on that one backend."""
    return "asyncio"


@pytest.fixture(scope="session")
def hostile_origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("hostile") / "hostile.db"
    subprocess.run(
        [sys.executable, "-m", "tests.web.worker", str(db), "hostile"],
        cwd=ROOT,
        check=True,
        timeout=120,
        capture_output=True,
    )
    return db


@pytest.fixture
def hostile(hostile_origin: Path, tmp_path: Path) -> Path:
    """A private copy of a store holding hostile actor ids, messages, replies and errors,
    and ``bill-1`` with ``charge_card("hang")`` in doubt (intent seq 6)."""
    return copy_store(hostile_origin, tmp_path)


@pytest.fixture(scope="session")
def crashed_origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("crashed")
    db = d / "incident.db"
    proc = start_crash_run(db, d / "calls.jsonl")
    kill(proc)
    assert proc.returncode == -signal.SIGKILL
    return db


@pytest.fixture
def crashed(crashed_origin: Path, tmp_path: Path) -> Path:
    """A private copy of the store a SIGKILLed on-call agent left: actor ``incident-7`` with
    ``page_oncall`` (intent seq 19) in doubt (see tests/cli/incident_worker.py)."""
    return copy_store(crashed_origin, tmp_path)


@pytest.fixture
def chromium() -> Iterator[str]:
    """Debian's Chromium, for Playwright; missing fails under CI (CI must prove the console
    works in a real browser), skips elsewhere."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        _pg.unavailable(
            "chromium not installed (apt-get install -y chromium)",
            "scripts/test.sh installs it with apt-get",
        )
    yield path


@pytest.fixture
def pg_url() -> str:
    return _pg.postgres_url("the console's PostgreSQL tests")
