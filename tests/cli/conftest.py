"""Fixtures for the CLI tests: real stores left behind by real crashed runs.

The crashed store is made once per session by running ``incident_worker.py crash`` in a
subprocess and SIGKILLing it while its non-idempotent ``page_oncall`` tool blocks (its intent
is durable, its result never will be). Each test gets its own copy of the files.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._support import copy_store, kill, start_crash_run


@pytest.fixture
def anyio_backend() -> str:
    """The CLI runs its commands on asyncio (SqliteStore on trio: tests/stores)."""
    return "asyncio"


@pytest.fixture(scope="session")
def crashed_origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("crashed")
    db, calls = d / "incident.db", d / "calls.jsonl"
    proc = start_crash_run(db, calls)
    kill(proc)
    assert proc.returncode == -signal.SIGKILL
    return db


@pytest.fixture
def crashed(crashed_origin: Path, tmp_path: Path) -> Path:
    """A private copy of the store the SIGKILLed run left (intent seq 19 in doubt), with the
    tool-call record (``calls.jsonl``) next to it."""
    shutil.copyfile(crashed_origin.parent / "calls.jsonl", tmp_path / "calls.jsonl")
    return copy_store(crashed_origin, tmp_path)


@pytest.fixture
def chromium() -> Iterator[str]:
    """Headless Chromium; missing fails under CI (it is part of what CI must prove)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        in_ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
        if in_ci:
            pytest.fail("chromium is required in CI (apt-get install -y chromium)")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    yield path
