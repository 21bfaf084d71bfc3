"""``actorlog cancel | terminate | delete`` and the views of ended actors, on a real SQLite
file (offline: a running runtime holds the file) with a real runtime process SIGKILLed
mid-step. The PostgreSQL (live) side is in ``test_lifecycle_cli_postgres.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from actorlog import ActorFinishedError, ActorSystem
from actorlog.stores import SqliteStore

from tests._payload import payload_of

from ._lifecycle_agents import Done, Job, Work
from ._support import HERE, cli, kill

pytestmark = pytest.mark.anyio


async def _finished_store(db: Path) -> None:
    async with ActorSystem(SqliteStore(str(db)), actors=[Job]) as system:
        ref = await system.spawn(Job, "fin-1")
        assert await ref.ask(Work("a")) == 1
        assert await ref.ask(Done("report sent")) == 2
        idle = await system.spawn(Job, "idle-1")
        assert await idle.ask(Work("b")) == 1


def _start_crash(db: Path) -> subprocess.Popen[str]:
    """A runtime process on ``db`` blocked in ``job-1``'s write tool, two messages queued."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.cli.lifecycle_worker", "sqlite-crash", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE.parent.parent,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "in-tool":
            return proc
    _, err = proc.communicate(timeout=10)
    raise AssertionError(f"worker exited {proc.returncode}: {err}")


async def test_views_of_a_finished_actor_then_delete(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    await _finished_store(db)
    rows = {a["actor_id"]: a for a in cli("actors", db, "--json").json_lines()}
    assert rows["fin-1"]["status"] == "finished"
    assert rows["idle-1"]["status"] == "idle"
    assert "finished" in cli("actors", db).out
    text = cli("history", db, "fin-1")
    assert text.code == 0, text.err
    assert "the actor finishes with this step: report sent" in text.out
    assert "[finished] finished (ctx.stop in step seq" in text.out
    items = cli("history", db, "fin-1", "--json").json_lines()
    assert [i["kind"] for i in items if i["type"] == "event"] == ["finished"]
    html = tmp_path / "h.html"
    assert cli("history", db, "fin-1", "--html", html).code == 0
    assert "finished (ctx.stop in step seq" in html.read_text()
    assert cli("verify", db).code == 0  # a finish effect is a clean log

    refused = cli("delete", db, "fin-1")
    assert refused.code == 1 and "--yes" in refused.err, refused
    assert cli("actors", db, "--json").json_lines()[0]["actor_id"] == "fin-1"  # still there
    done = cli("delete", db, "fin-1", "--yes", "--by", "ops", "--reason", "gdpr request")
    assert done.code == 0, done.err
    assert "deleted fin-1" in done.out
    [gone] = cli("actors", db, "--deleted", "--json").json_lines()
    assert (gone["actor_id"], gone["by"], gone["reason"], gone["ended"]) == (
        "fin-1",
        "ops",
        "gdpr request",
        "finished",
    )
    assert "gdpr request" in cli("actors", db, "--deleted").out
    assert [a["actor_id"] for a in cli("actors", db, "--json").json_lines()] == ["idle-1"]
    h = cli("history", db, "fin-1")
    assert h.code == 2 and "was deleted" in h.err and "by ops (gdpr request)" in h.err, h
    again = cli("delete", db, "fin-1", "--yes")
    assert again.code == 2 and "was deleted" in again.err
    assert cli("verify", db).code == 0


async def test_delete_of_an_actor_that_has_not_ended_needs_force(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    await _finished_store(db)
    refused = cli("delete", db, "idle-1", "--yes")
    assert refused.code == 1 and "--force" in refused.err, refused
    forced = cli("delete", db, "idle-1", "--force")
    assert forced.code == 0, forced.err
    assert "warning" in forced.err and "unfinished work" in forced.err
    [gone] = cli("actors", db, "--deleted", "--json").json_lines()
    assert gone["forced"] is True and gone["ended"] is None
    assert cli("delete", db, "nobody", "--force").code == 2


async def test_cancel_offline_is_acted_on_at_the_next_start(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    proc = _start_crash(db)
    try:
        locked = cli("cancel", db, "job-1")
        assert locked.code == 2
        assert "in use" in locked.err and "only offline" in locked.err, locked.err
        assert "PostgreSQL" in locked.err
    finally:
        kill(proc)
    r = cli("cancel", db, "job-1", "--by", "ops", "--reason", "stuck upstream")
    assert r.code == 0, r.err
    kinds = [i["kind"] for i in cli("history", db, "job-1", "--json").json_lines() if "kind" in i]
    assert "cancel_requested" in kinds
    async with ActorSystem(SqliteStore(str(db)), actors=[Job]) as system:
        ref = system.ref(Job, "job-1")
        assert await ref.ask(Work("q3")) == 4  # the cancelled step, q1, q2, then this
    items = cli("history", db, "job-1", "--json").json_lines()
    events = [i for i in items if i["type"] == "event"]
    [cancelled] = [e for e in events if e["kind"] == "cancelled"]
    assert cancelled["detail"]["reason"] == "stuck upstream"
    steps = [i for i in items if i["type"] == "step"]
    assert steps[0]["error"]["type"] == "StepCancelledError"
    assert [s["status"] for s in steps] == ["error", "ok", "ok", "ok"]
    assert "cancelled by ops: stuck upstream" in cli("history", db, "job-1").out
    assert cli("verify", db).code == 0  # a cancelled step is a clean log
    async with ActorSystem(SqliteStore(str(db)), actors=[Job]) as system:  # replay is exact
        assert await system.ref(Job, "job-1").ask(Work("q4")) == 5


async def test_terminate_offline_with_queued_messages(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    proc = _start_crash(db)
    try:
        locked = cli("terminate", db, "job-1")
        assert locked.code == 2 and "only offline" in locked.err
    finally:
        kill(proc)
    r = cli("terminate", db, "job-1", "--by", "ops", "--reason", "runaway")
    assert r.code == 0, r.err
    [a] = cli("actors", db, "--json").json_lines()
    assert a["status"] == "terminated"
    async with ActorSystem(SqliteStore(str(db)), actors=[Job]) as system:
        ref = system.ref(Job, "job-1")
        with pytest.raises(ActorFinishedError, match="runaway"):
            await ref.ask(Work("q3"))
        with pytest.raises(ActorFinishedError):
            await system.spawn(Job, "job-1")
    items = cli("history", db, "job-1", "--json").json_lines()
    assert [i["kind"] for i in items if i["type"] == "event" and i["kind"] == "terminated"]
    text = cli("history", db, "job-1").out
    assert "terminated by ops: runaway; no more steps" in text
    store = SqliteStore(str(db), read_only=True)
    await store.open()
    try:
        # the two queued messages got a recorded ActorFinishedError; nothing more was logged
        steps = [
            payload_of(r.kind, r.payload) for r in await store.read("job-1") if r.kind == "step"
        ]
        assert [s["error"]["type"] for s in steps][-2:] == ["ActorFinishedError"] * 2
        messages = [r for r in await store.read("job-1") if r.kind == "message"]
        assert len(messages) == 3
    finally:
        await store.close()
    assert cli("verify", db).code == 0
    d = cli("delete", db, "job-1", "--yes")
    assert d.code == 0, d.err


async def test_a_store_from_before_the_audit_table_reads_clean(tmp_path: Path) -> None:
    """A SQLite file written before ``store_audit`` existed, opened read-only: no
    deletions, and a missing actor is just missing (not "damaged below the log")."""
    import sqlite3

    db = tmp_path / "old.db"
    await _finished_store(db)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER store_audit_delete")
        conn.execute("DROP TABLE store_audit")
    r = cli("actors", db, "--deleted")
    assert r.code == 0 and "no actors deleted" in r.out, r
    h = cli("history", db, "nobody")
    assert h.code == 2 and "no actor 'nobody'" in h.err, h
