"""Replies across runtimes: the owner announces a durable step (NOTIFY actorlog_reply) and the
asking runtime's listener wakes the ``ask`` at once; polling remains the fallback.

Every test sets the polling intervals to an hour, so an ask answered at all (within its
``timeout``, a guard against a hang, not a measure of speed) can only have been woken by a
notification (or, where a test says so, by the fallback it exercises). No test measures time:
the machine may be loaded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import asyncpg
import pytest
from actorlog import ActorSystem
from actorlog._cluster import ownership
from actorlog.stores import PostgresStore
from actorlog.stores.postgres import REPLY_CHANNEL
from actorlog.stores.postgres.leases import _parse_reply_payload, _reply_payloads

from .agents import LEDGER, NAP_GATE, NAPPING, ON_NAP, Account, Deposit, Nap, Sleeper

pytestmark = pytest.mark.anyio

SLOW = 3600.0  # every polling interval in these tests: never reached by an ask
ASK_TIMEOUT = 60  # a guard against a hang


@asynccontextmanager
async def _runtime(
    url: str, schema: str, owner: str, *, reply_poll: float = SLOW
) -> AsyncIterator[ActorSystem]:
    system = ActorSystem(
        PostgresStore(url, schema=schema),
        actors=[Account, Sleeper],
        owner=owner,
        lease_ttl=10,
        poll_interval=SLOW,  # inbox polling: the owner must be woken by NOTIFY
        reply_poll_interval=reply_poll,
    )
    async with system:
        yield system


def _listener(system: ActorSystem) -> object:
    store = system.store
    assert isinstance(store, PostgresStore)
    assert store._listener is not None
    return store._listener


async def _steps(store: object, actor_id: str) -> list[int]:
    assert isinstance(store, PostgresStore)
    return [r.ref for r in await store.read(actor_id, kinds=["step"])]


async def test_remote_ask_is_answered_by_notification(pg_url: str, pg_schema: str) -> None:
    LEDGER.clear()
    async with _runtime(pg_url, pg_schema, "a") as a, _runtime(pg_url, pg_schema, "b") as b:
        assert await (await a.spawn(Account, "acct")).ask(Deposit(1)) == 1
        remote = b.ref(Account, "acct")
        for i in range(2, 7):
            # polling is an hour: the notification woke it
            assert await remote.ask(Deposit(i), message_id=f"m{i}", timeout=ASK_TIMEOUT) == sum(
                range(1, i + 1)
            )
        assert b.status("acct") == "unknown"  # every ask went through the inbox
        # Asking again with a used message id: the recorded reply, no second step.
        assert await remote.ask(Deposit(3), message_id="m3", timeout=ASK_TIMEOUT) == 6
        own = b._ownership
        assert own is not None and own.remote.asks == {}  # no waiter left behind
        assert len(await _steps(a.store, "acct")) == 6
    assert sorted(n for _, n in LEDGER) == [1, 2, 3, 4, 5, 6]  # each step ran once


async def test_slow_step_is_answered_when_it_ends(pg_url: str, pg_schema: str) -> None:
    NAPPING[0] = 1.0
    try:
        async with _runtime(pg_url, pg_schema, "a") as a, _runtime(pg_url, pg_schema, "b") as b:
            await a.spawn(Sleeper, "s")
            # Answered although the step outlasts every look the ask makes on its own (5 ms
            # doubling, then hourly): the step's notification woke it.
            assert await b.ref(Sleeper, "s").ask(Nap(2.7), timeout=ASK_TIMEOUT) == "rested"
    finally:
        NAPPING[0] = 0.0


async def test_concurrent_remote_asks(pg_url: str, pg_schema: str) -> None:
    """30 asks wait at once (the steps are held until all 30 are registered as waiting), and
    each is woken by its step's notification (polling is an hour)."""
    NAPPING[0] = 1.0
    gate = anyio.Event()
    NAP_GATE.append(gate)
    try:
        async with _runtime(pg_url, pg_schema, "a") as a, _runtime(pg_url, pg_schema, "b") as b:
            for i in range(10):
                await a.spawn(Sleeper, f"s{i}")
            own = b._ownership
            assert own is not None
            replies: list[str] = []

            def waiting() -> int:
                return sum(len(w) for by in own.remote.asks.values() for w in by.values())

            async def ask(i: int) -> None:
                ref = b.ref(Sleeper, f"s{i % 10}")
                replies.append(await ref.ask(Nap(0.2), message_id=f"n{i}", timeout=ASK_TIMEOUT))

            async with anyio.create_task_group() as tg:
                for i in range(30):  # three steps queued per actor
                    tg.start_soon(ask, i)
                with anyio.fail_after(ASK_TIMEOUT):  # a guard against a hang
                    while waiting() < 30:  # every ask waits at once: they overlap
                        await anyio.sleep(0.01)
                assert replies == []  # the steps are held: nothing answered yet
                gate.set()
            assert replies == ["rested"] * 30
            assert waiting() == 0  # no waiter left behind
            for i in range(10):
                assert len(await _steps(a.store, f"s{i}")) == 3
    finally:
        NAP_GATE.remove(gate)
        NAPPING[0] = 0.0


async def test_missed_notifications_are_covered_by_polling(pg_url: str, pg_schema: str) -> None:
    async with (
        _runtime(pg_url, pg_schema, "a") as a,
        _runtime(pg_url, pg_schema, "b", reply_poll=0.3) as b,
    ):
        await a.spawn(Account, "acct")
        # b stops hearing replies (its connection stays up: nothing tells it).
        conn = _listener(b)._conn  # type: ignore[attr-defined]
        await conn.execute(f"UNLISTEN {REPLY_CHANNEL}")
        remote = b.ref(Account, "acct")
        for i in (1, 2, 3):
            # found by the 0.3 s fallback polling (no notification reaches b any more)
            assert await remote.ask(Deposit(1), message_id=f"p{i}", timeout=ASK_TIMEOUT) == i
        assert len(await _steps(a.store, "acct")) == 3


async def test_listener_killed_during_a_step(pg_url: str, pg_schema: str) -> None:
    started = anyio.Event()
    ON_NAP.append(started.set)
    NAPPING[0] = 1.0
    try:
        async with _runtime(pg_url, pg_schema, "a") as a, _runtime(pg_url, pg_schema, "b") as b:
            await a.spawn(Sleeper, "s")
            listener = _listener(b)
            pid = listener.server_pid  # type: ignore[attr-defined]
            assert pid is not None
            result: list[str] = []

            async def ask() -> None:
                result.append(
                    await b.ref(Sleeper, "s").ask(Nap(0.5), message_id="k", timeout=ASK_TIMEOUT)
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                with anyio.fail_after(5):
                    await started.wait()  # the step runs on a
                killer = await asyncpg.connect(pg_url)
                try:
                    assert await killer.fetchval("SELECT pg_terminate_backend($1)", pid)
                finally:
                    await killer.close()
            # Reconnected (and looked again): answered, though polling is an hour.
            assert result == ["rested"]
            assert listener.reconnects >= 1  # type: ignore[attr-defined]
            new_pid = listener.server_pid  # type: ignore[attr-defined]
            assert new_pid is not None and new_pid != pid
            # Notifications flow again on the new connection.
            NAPPING[0] = 0.0
            remote = b.ref(Sleeper, "s")
            assert await remote.ask(Nap(1), message_id="k2", timeout=ASK_TIMEOUT) == "rested"
            assert len(await _steps(a.store, "s")) == 2
    finally:
        ON_NAP.remove(started.set)
        NAPPING[0] = 0.0


async def test_timeout_and_cancellation_leave_no_waiters(pg_url: str, pg_schema: str) -> None:
    """The steps are held (``NAP_GATE``) until both asks gave up, so the timeout and the
    cancellation happen whatever the machine's speed."""
    NAPPING[0] = 1.0
    gate = anyio.Event()
    NAP_GATE.append(gate)
    try:
        async with _runtime(pg_url, pg_schema, "a") as a, _runtime(pg_url, pg_schema, "b") as b:
            await a.spawn(Sleeper, "s")
            remote = b.ref(Sleeper, "s")
            with pytest.raises(TimeoutError):
                await remote.ask(Nap(0.6), message_id="t", timeout=0.2)
            with anyio.move_on_after(0.1):
                await remote.ask(Nap(0.1), message_id="c")
            own = b._ownership
            assert own is not None and own.remote.asks == {}
            gate.set()
            # The messages stay queued and are handled once; asking again (with the same
            # messages: an id names one message) gets the replies.
            assert await remote.ask(Nap(0.6), message_id="t", timeout=ASK_TIMEOUT) == "rested"
            assert await remote.ask(Nap(0.1), message_id="c", timeout=ASK_TIMEOUT) == "rested"
            assert len(await _steps(a.store, "s")) == 2
    finally:
        NAP_GATE.remove(gate)
        NAPPING[0] = 0.0


async def test_listener_closed_on_exit(pg_url: str, pg_schema: str) -> None:
    async with _runtime(pg_url, pg_schema, "a") as a:
        store = a.store
        assert isinstance(store, PostgresStore)
        pid = _listener(a).server_pid  # type: ignore[attr-defined]
    assert store._listener is None
    conn = await asyncpg.connect(pg_url)
    try:
        with anyio.fail_after(5):
            while await conn.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid):
                await anyio.sleep(0.02)
    finally:
        await conn.close()


def test_reply_payloads_fit_notify() -> None:
    long_actor = "é" * 200  # 400 bytes in UTF-8
    pairs = [(f"{long_actor}{i}", f"msg-{i}") for i in range(200)]
    pairs.append(("a", "x" * 9000))  # too long with its message id: announced per actor
    payloads = _reply_payloads(pairs + pairs[:3])  # duplicates are sent once
    assert len(payloads) > 1
    assert all(len(p.encode()) < 8000 for p in payloads)
    got = [pair for p in payloads for pair in _parse_reply_payload(p)]
    assert got == [*pairs[:-1], ("a", None)]
    assert _parse_reply_payload("not json") == []
    assert _parse_reply_payload(json.dumps({"a": 1})) == []
    assert _reply_payloads([]) == []


async def test_notify_and_listen_replies(pg_store: PostgresStore) -> None:
    got: list[tuple[str | None, str | None]] = []
    stop = await pg_store.listen_replies(lambda a, m: got.append((a, m)))
    inbox: list[str] = []
    stop_inbox = await pg_store.listen_inbox(inbox.append)
    try:
        listener = pg_store._listener
        assert listener is not None and listener._conn is not None  # one shared connection
        pairs = [("x" * 200 + str(i), f"m{i}") for i in range(100)]
        await pg_store.notify_replies(pairs)
        await pg_store.inbox_put("y", "m", "t.T", "{}", None)
        with anyio.fail_after(5):
            while len(got) < 100 or not inbox:
                await anyio.sleep(0.01)
        assert got == pairs
        assert inbox == ["y"]
    finally:
        await stop()
        assert pg_store._listener is not None  # still serving the inbox callback
        await stop_inbox()
    assert pg_store._listener is None


class _CountingStore(PostgresStore):
    """A real PostgresStore that counts the lease acquisitions it is asked for."""

    acquires = 0

    async def acquire_lease(self, actor_id: str, owner: str, ttl: float) -> int | None:
        self.acquires += 1
        return await super().acquire_lease(actor_id, owner, ttl)


async def test_a_send_stream_to_a_remote_actor_does_not_retake_the_lease_each_time(
    pg_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sending to an actor another runtime owns goes to the inbox; the sender asks the store
    for the lease once per recheck window (``FOREIGN_RECHECK``, at most a third of its lease
    time), not once per message (each attempt locks the lease row). The window is made
    an hour long here: with the default second, a loaded machine took longer than that for
    the 40 sends and the sender rightly asked again (the test, not the code, was wrong)."""
    monkeypatch.setattr(ownership, "FOREIGN_RECHECK", 3600.0)
    LEDGER.clear()
    counting = _CountingStore(pg_url, schema=pg_schema)
    async with _runtime(pg_url, pg_schema, "a") as a:
        assert await (await a.spawn(Account, "acct")).ask(Deposit(1)) == 1
        system = ActorSystem(counting, actors=[Account], owner="b", lease_ttl=3 * 3600)
        async with system as b:
            remote = b.ref(Account, "acct")
            for _ in range(40):
                await remote.send(Deposit(1))
            assert counting.acquires == 1
            assert await remote.ask(Deposit(1)) == 42  # every send applied exactly once
        assert len(await a.store.read("acct", kinds=["message"])) == 42


def _listener_tasks() -> list[str]:
    return sorted(
        t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("actorlog:listen")
    )


async def test_the_listener_owns_its_tasks_and_close_ends_them(pg_store: PostgresStore) -> None:
    """The supervisor runs in the listener's own task group (hosted by one task) while anyone
    listens, and no task of it is left once the store is closed, also with a listener still
    subscribed."""
    stop = await pg_store.listen_inbox(lambda _actor: None)
    await pg_store.listen_replies(lambda _a, _m: None)  # never stopped: close() must end it
    await anyio.sleep(0.05)  # let the host task start its task group
    running = ["actorlog:listen", "actorlog:listen-supervise"]  # the host, the supervisor
    assert _listener_tasks() == running
    await stop()
    assert _listener_tasks() == running
    await pg_store.close()
    assert _listener_tasks() == []
    assert pg_store._listener is None
