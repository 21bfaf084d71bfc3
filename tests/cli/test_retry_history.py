"""``actorlog history`` shows a tool's attempts (issue 14, part 1): each failed attempt of
its retry policy with its error and the delay chosen, as a table, JSON lines and HTML."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from tests.effects import test_retry as agents

from ._support import cli


@pytest.fixture
def retried(tmp_path: Path) -> Path:
    """A store whose actor ``h1`` called ``flaky_read``, which failed twice, then worked."""
    db = tmp_path / "agents.db"

    async def main() -> None:
        agents.RUNS.clear()
        agents.FAIL["flaky_read"] = 2
        async with ActorSystem(SqliteStore(db), actors=[agents.Caller]) as system:
            ref = await system.spawn(agents.Caller, "h1")
            assert await ref.ask(agents.Use("flaky_read"), message_id="m1") == (
                "flaky_read ok on run 3"
            )
        agents.FAIL.clear()

    anyio.run(main)
    return db


def test_history_table_shows_each_attempt(retried: Path) -> None:
    r = cli("history", retried, "h1")
    assert r.code == 0, r.err
    assert "attempt 1 failed: ValueError" in r.out
    assert "attempt 2 failed: ValueError" in r.out
    assert "next attempt after 0.01s" in r.out and "next attempt after 0.02s" in r.out
    assert "(attempt 3)" in r.out or "attempt 3" in r.out
    assert r.out.index("attempt 1 failed") < r.out.index("attempt 2 failed")


def test_history_json_has_the_attempts(retried: Path) -> None:
    lines = cli("history", retried, "h1", "--json").json_lines()
    (step,) = [x for x in lines if x["type"] == "step"]
    (call,) = step["calls"]
    assert (call["status"], call["attempts"]) == ("ok", 3)
    failed = [d for d in call["decisions"] if d["action"] == "attempt_failed"]
    assert [(d["attempt"], d["delay"], d["error"]["type"]) for d in failed] == [
        (1, 0.01, "ValueError"),
        (2, 0.02, "ValueError"),
    ]


def test_history_html_shows_the_attempts(retried: Path, tmp_path: Path) -> None:
    page = tmp_path / "h.html"
    assert cli("history", retried, "h1", "--html", page).code == 0
    text = page.read_text()
    assert "attempt 1 failed: ValueError" in text and "attempt 2 failed" in text
