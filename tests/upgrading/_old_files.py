"""What the tests of old SQLite files share (``test_format_v1_file``, ``test_format_files``):
the payer agent's hooks cleared around each test, a working copy of a fixture
file, and the format version a file records."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from .agents import KEYS, KILL_IN_CHARGE

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    KEYS.clear()
    KILL_IN_CHARGE.clear()
    yield
    KEYS.clear()
    KILL_IN_CHARGE.clear()


def copy_of(fixture: str, tmp_path: Path) -> Path:
    """A copy of ``fixtures/<fixture>`` to open and write (the fixture stays as recorded)."""
    path = tmp_path / fixture
    shutil.copyfile(FIXTURES / fixture, path)
    return path


def format_version(path: Path) -> str:
    """The ``format_version`` a SQLite file records in ``actorlog_meta``."""
    con = sqlite3.connect(path)
    try:
        (value,) = con.execute(
            "SELECT value FROM actorlog_meta WHERE key = 'format_version'"
        ).fetchone()
    finally:
        con.close()
    return str(value)
