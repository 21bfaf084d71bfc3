"""``actorlog history`` shows durable sleeps, ``send_later`` timers and the messages the timer
loop delivered (issue 14, part 2) in words, not as effect JSON: the table and the HTML."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem
from actorlog._views.term import when
from actorlog.stores import SqliteStore

from tests._payload import payload_of
from tests.time.agents import Get, Later, Nap, Note, Recorder, Sender, Sleeper

from ._support import cli

UTC = datetime.UTC
START = datetime.datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


async def _wait_fired(system: ActorSystem, n: int) -> None:
    with anyio.fail_after(15):
        while system._timers.fired < n:
            await anyio.sleep(0.01)


@pytest.fixture
def timed(tmp_path: Path) -> Path:
    """``s`` slept, then (in a second step) started a one-hour sleep and the runtime
    stopped; ``snd`` sent ``rec`` a note later, which fired; schedule ``daily`` fired once
    (catching up) at ``rec2``."""
    db = tmp_path / "t.db"

    async def main() -> None:
        async with ActorSystem(SqliteStore(db), actors=[Sleeper, Sender, Recorder]) as system:
            s = system.ref(Sleeper, "s")
            await s.ask(Nap(0.01, "a"), message_id="nap-a")
            await s.send(Nap(3600, "b"), message_id="nap-b")
            await system.ref(Sender, "snd").ask(Later("rec", "x", 0.01), message_id="later")
            every = datetime.timedelta(days=1)
            rec2 = system.ref(Recorder, "rec2")
            await system.schedule(
                "daily", rec2, Note("d"), every=every, start=START, missed="catch_up_once"
            )
            await _wait_fired(system, 2)
            assert await system.ref(Recorder, "rec").ask(Get()) == ["x"]
            assert await rec2.ask(Get()) == ["d"]
            with anyio.fail_after(10):
                while not (system._cells.get("s") and system._cells["s"].sleeping):
                    await anyio.sleep(0.01)

    anyio.run(main)
    return db


async def _effects(db: Path, actor_id: str, tag: str) -> list[dict[str, object]]:
    store = SqliteStore(db)
    await store.open()
    try:
        rows = await store.read(actor_id, kinds=["effect"])
        return [payload_of(r.kind, r.payload)["value"] for r in rows if r.type_tag == tag]
    finally:
        await store.close()


def test_history_says_sleeps_and_slept(timed: Path) -> None:
    (a, b) = anyio.run(_effects, timed, "s", "sleep")
    r = cli("history", timed, "s", "--color", "never")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    slept = [x for x in lines if "sleep " in x]
    assert len(slept) == 2, r.out
    assert slept[0].endswith(f"sleep slept until {when(a['until'])}")  # type: ignore[arg-type]
    assert f"sleep sleeps until {when(b['until'])} (" in slept[1]  # type: ignore[arg-type]
    assert slept[1].endswith("s left)")
    assert '{"until"' not in r.out


def test_history_says_what_send_later_sends_and_when(timed: Path) -> None:
    (v,) = anyio.run(_effects, timed, "snd", "send_later")
    r = cli("history", timed, "snd", "--color", "never")
    assert r.code == 0, r.err
    expected = (
        f"send_later send tests.time.agents.Note to rec at {when(v['due'])}, "  # type: ignore[arg-type]
        "timer id snd/"
    )
    assert expected in r.out, r.out
    assert re.search(r"timer id snd/[0-9a-f]{16}/1/1\n", r.out), r.out
    assert '"timer_id"' not in r.out


def test_history_labels_timer_and_schedule_firings(timed: Path) -> None:
    r = cli("history", timed, "rec", "--color", "never")
    assert r.code == 0, r.err
    found = re.search(
        r"timer (snd/[0-9a-f]{16}/1/1) fired: message timer:\1 tests\.time\.agents\.Note", r.out
    )
    assert found, r.out
    r = cli("history", timed, "rec2", "--color", "never")
    assert r.code == 0, r.err
    # catch_up_once: one message for the latest missed firing (09:00 UTC of a day)
    found = re.search(
        r"schedule daily fired \(firing of (\S+T09:00:00\+00:00)\): "
        r"message schedule:daily@\1 tests\.time\.agents\.Note",
        r.out,
    )
    assert found, r.out
    # a message from a caller is not labelled
    r = cli("history", timed, "s", "--color", "never")
    assert "fired" not in r.out


def test_html_history_says_the_same(timed: Path, tmp_path: Path) -> None:
    out = tmp_path / "h.html"
    r = cli("history", timed, "snd", "--html", out)
    assert r.code == 0, r.err
    page = out.read_text(encoding="utf-8")
    assert re.search(r"timer id snd/[0-9a-f]{16}/1/1", page)
    out2 = tmp_path / "r.html"
    assert cli("history", timed, "rec", "--html", out2).code == 0
    assert re.search(r"timer snd/[0-9a-f]{16}/1/1 fired", out2.read_text(encoding="utf-8"))
