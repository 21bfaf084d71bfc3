"""Cancelled writes needing a ruling in the console (issue 25; docs/operators.md "Cancelled
writes in doubt"): the in-doubt queue, the overview and the actor's header list them (task,
seq, tool, arguments, when) and count them, and a signed-in operator rules on one through
``ops.resolve``, the path of ``actorlog resolve``.

Before: the console listed only steps waiting for a decision, so a write its handler
cancelled while it ran (the step went on) was shown to nobody but ``actorlog history``.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import anyio
from actorlog import ops
from actorlog.stores import SqliteStore

from tests.web._agents import make_cancelled_write
from tests.web._client import TOKEN, console, csrf_of, sign_in

ACTOR = "payer-1"


def _stored(db: Path) -> tuple[int, int, list[ops.Call]]:
    """The actor's last seq, its number of events, and its calls needing a ruling."""

    async def read() -> tuple[int, int, list[ops.Call]]:
        store = SqliteStore(db)
        await store.open()
        try:
            last = (await ops.actor_status(store, ACTOR)).last_seq
            events = len(await store.read_events(ACTOR))
            return last, events, await ops.calls_needing_ruling(store, ACTOR)
        finally:
            await store.close()

    return anyio.run(read, backend="asyncio")


def _history(db: Path) -> ops.History:
    async def read() -> ops.History:
        store = SqliteStore(db)
        await store.open()
        try:
            return await ops.history(store, ACTOR)
        finally:
            await store.close()

    return anyio.run(read, backend="asyncio")


def test_the_queue_overview_and_actor_page_list_a_cancelled_write_needing_a_ruling(
    tmp_path: Path,
) -> None:
    db = tmp_path / "pay.db"
    seq = make_cancelled_write(db)
    with console(f"sqlite:///{db}") as (client, _):
        queue = client.get("/queue").text
        assert 'id="empty"' not in queue
        listed = r'data-actor="([^"]*)" data-intent-seq="(\d+)" data-ruling="1"'
        assert re.findall(listed, queue) == [(ACTOR, str(seq))]
        row = queue[queue.index('data-ruling="1"') :]
        row = row[: row.index("</tr>")]
        assert "task 0" in row and "web.transfer" in row and "acme" in row and "120" in row
        assert 'id="queue-count">1<' in queue
        # read-only: the CLI line to rule, no retry offered
        assert f"actorlog resolve sqlite:///{db} {ACTOR} {seq} --result JSON | --fail" in queue
        assert "--retry" not in row

        overview = client.get("/").text
        assert f"{seq} web.transfer (needs a ruling)" in overview

        page = client.get("/actor", params={"id": ACTOR}).text
        head = page[page.index('id="in-doubt"') :]
        assert "1 tool call(s) may or may not have happened" in head
        assert f'data-intent-seq="{seq}" data-ruling="1"' in head
        assert "task 0" in head and "needs a ruling" in head


def test_an_operator_rules_on_a_cancelled_write_from_the_console(tmp_path: Path) -> None:
    db = tmp_path / "pay.db"
    seq = make_cancelled_write(db)
    last, events, _ = _stored(db)
    with console(f"sqlite:///{db}", allow_writes=True, token=TOKEN) as (client, _):
        sign_in(client)
        page = client.get("/actor", params={"id": ACTOR}).text
        form = page[page.index('<form class="resolve ruling"') :]
        form = form[: form.index("</form>")]
        assert 'value="retry"' not in form and "Record ruling" in form
        csrf = csrf_of(page)
        base = {"csrf": csrf, "id": ACTOR, "intent_seq": str(seq)}
        # a retry cannot run: refused, nothing stored
        r = client.post("/resolve", data={**base, "action": "retry"})
        assert r.status_code == 400 and r.headers["x-actorlog-error"] == "ConfigurationError"
        assert "a retry cannot run" in r.text
        assert _stored(db)[:2] == (last, events)
        # the ruling: recorded in the operator history, the log is as it was
        r = client.post(
            "/resolve",
            data={
                **base,
                "action": "fail",
                "message": "the bank has no such transfer",
                "reason": "checked the statement",
                "by": "ops@example.com",
            },
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text
        shown = client.get(r.headers["location"]).text
        assert "recorded ruling (fail) on intent seq" in shown and "ops@example.com" in shown
        assert _stored(db) == (last, events + 1, [])
        (call,) = _history(db).steps[0].calls
        assert call.ruling is not None and call.ruling.action == "fail"
        assert (call.ruling.by, call.ruling.reason) == ("ops@example.com", "checked the statement")
        # the lists no longer show it
        assert 'data-ruling="1"' not in client.get("/queue").text
        assert 'id="in-doubt"' not in shown
        assert "needs a ruling)" not in client.get("/").text
        # a second ruling is refused: nothing stored
        r = client.post("/resolve", data={**base, "action": "result", "value": '"ok"'})
        assert r.status_code == 409 and r.headers["x-actorlog-error"] == "AlreadyDecidedError"
        assert _stored(db)[:2] == (last, events + 1)


def test_the_actor_page_lists_a_cancelled_write_whose_in_doubt_event_was_lost(
    tmp_path: Path,
) -> None:
    """The runtime's ``in_doubt`` event is best effort (a crash can lose it): the actor page
    still lists a call of the steps it shows, read from the log."""
    db = tmp_path / "pay.db"
    seq = make_cancelled_write(db)
    with sqlite3.connect(db) as con:  # what a crash right after the result leaves
        assert con.execute("DELETE FROM events WHERE kind = 'in_doubt'").rowcount == 1
    with console(f"sqlite:///{db}") as (client, _):
        page = client.get("/actor", params={"id": ACTOR}).text
        assert f'data-intent-seq="{seq}" data-ruling="1"' in page
