"""Load: thousands of actors and tens of thousands of messages on one SQLite file.

CI runs 2,000 actors and 20,000 messages; ``ACTORLOG_SOAK=1`` runs 10,000 and 100,000.
Concurrent senders deliver every message with a stable message id; then every actor is
asked for its state, the system is restarted over the same file (recovering every actor),
and asked again: nothing lost, nothing handled twice, in the live system and after recovery.

Memory is measured (resident set size before and after), not asserted. Without passivation
it grows with the number of live actors; the second test runs a quarter of the load with
``max_actors`` and checks that the number of loaded actors stays bounded while every
message is still handled exactly once. The figures are printed in the session summary and
recorded in docs/testing.md.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context
from actorlog.stores import SqliteStore

from .conftest import BASE_SEED, FIGURES, soak_factor

SENDERS = 64


@attrs.define
class Deposit:
    n: int


@attrs.define
class Balance:
    pass


@attrs.define
class Account:
    count: int = 0
    total: int = 0
    last: int = 0


class Ledger(Actor[Account]):
    __actorlog_tag__ = "torture.Ledger"
    snapshot_every = 5

    async def receive(self, ctx: Context, msg: Deposit | Balance) -> Any:
        if isinstance(msg, Balance):
            return attrs.asdict(self.state)
        self.state.count += 1
        self.state.total += msg.n
        self.state.last = msg.n
        return self.state.total


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _sizes() -> tuple[int, int]:
    actors = min(2_000 * soak_factor(), 10_000)
    return actors, 10 * actors


async def _balances(system: ActorSystem, ids: list[str]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}

    async def worker(chunk: list[str]) -> None:
        for actor_id in chunk:
            out[actor_id] = await system.ref(Ledger, actor_id).ask(Balance())

    async with anyio.create_task_group() as tg:
        for i in range(SENDERS):
            tg.start_soon(worker, ids[i::SENDERS])
    return out


def test_thousands_of_actors_and_messages_with_concurrent_senders(tmp_path: Path) -> None:
    n_actors, n_messages = _sizes()
    rng = random.Random(BASE_SEED)
    ids = [f"acct-{i:05d}" for i in range(n_actors)]
    # every actor gets at least one message; the rest land at random
    plan = [(ids[i % n_actors], rng.randrange(1, 100)) for i in range(n_messages)]
    rng.shuffle(plan)
    expected: dict[str, dict[str, int]] = {a: {"count": 0, "total": 0} for a in ids}
    for actor_id, n in plan:
        expected[actor_id]["count"] += 1
        expected[actor_id]["total"] += n
    path = tmp_path / "load.db"
    figures: dict[str, float] = {}

    async def live() -> None:
        rss0 = _rss_mb()
        t0 = time.perf_counter()
        async with ActorSystem(SqliteStore(path), actors=[Ledger]) as system:
            next_i = 0

            async def sender() -> None:
                nonlocal next_i
                while next_i < len(plan):
                    i = next_i
                    next_i += 1
                    actor_id, n = plan[i]
                    await system.ref(Ledger, actor_id).send(Deposit(n), message_id=f"d{i}")

            async with anyio.create_task_group() as tg:
                for _ in range(SENDERS):
                    tg.start_soon(sender)
            figures["send_s"] = time.perf_counter() - t0
            got = await _balances(system, ids)
            figures["live_s"] = time.perf_counter() - t0
            figures["rss_live_mb"] = _rss_mb() - rss0
            # resending every message id is a no-op (exactly once from the sender's side)
            for i in rng.sample(range(len(plan)), 200):
                actor_id, n = plan[i]
                await system.ref(Ledger, actor_id).send(Deposit(n), message_id=f"d{i}")
        for actor_id in ids:
            want = expected[actor_id]
            have = got[actor_id]
            assert (have["count"], have["total"]) == (want["count"], want["total"]), actor_id

    async def recovered() -> None:
        t0 = time.perf_counter()
        async with ActorSystem(SqliteStore(path), actors=[Ledger]) as system:
            got = await _balances(system, ids)
            figures["recover_s"] = time.perf_counter() - t0
        for actor_id in ids:
            have, want = got[actor_id], expected[actor_id]
            assert (have["count"], have["total"]) == (want["count"], want["total"]), actor_id

    anyio.run(live, backend="asyncio")
    anyio.run(recovered, backend="asyncio")

    db = sqlite3.connect(path)
    try:
        (messages,) = db.execute("SELECT count(*) FROM entries WHERE kind='message'").fetchone()
        unhandled = db.execute(
            "SELECT count(*) FROM entries m WHERE m.kind='message' AND NOT EXISTS "
            "(SELECT 1 FROM entries s WHERE s.actor_id=m.actor_id AND s.kind='step' "
            "AND s.ref=m.seq)"
        ).fetchone()[0]
        size_mb = path.stat().st_size / 2**20
    finally:
        db.close()
    # deposits + two Balance asks per actor; every one of them handled
    assert messages == n_messages + 2 * n_actors
    assert unhandled == 0
    FIGURES["load actors"] += n_actors
    FIGURES["load messages"] += n_messages
    FIGURES["load rss MB (live system)"] += round(figures["rss_live_mb"])
    FIGURES["load messages/s (send)"] += round(n_messages / figures["send_s"])
    FIGURES["load seconds to recover all"] += round(figures["recover_s"])
    FIGURES["load store MB"] += round(size_mb)


MAX_ACTIVE = 100


def test_passivation_keeps_loaded_actors_bounded_under_load(tmp_path: Path) -> None:
    """The same load with ``max_actors``: idle actors are snapshotted out of memory while the
    senders run, at most ``MAX_ACTIVE`` (plus the ones busy right now) stay loaded, and every
    message is still handled exactly once, before and after a restart."""
    n_actors, n_messages = (n // 4 for n in _sizes())  # re-recovering actors is the cost
    rng = random.Random(BASE_SEED + 1)
    ids = [f"acct-{i:05d}" for i in range(n_actors)]
    plan = [(ids[i % n_actors], rng.randrange(1, 100)) for i in range(n_messages)]
    rng.shuffle(plan)
    expected: dict[str, tuple[int, int]] = {}
    for actor_id, n in plan:
        count, total = expected.get(actor_id, (0, 0))
        expected[actor_id] = (count + 1, total + n)
    path = tmp_path / "load-passivated.db"
    peak = 0

    async def live() -> None:
        nonlocal peak
        rss0 = _rss_mb()
        async with ActorSystem(SqliteStore(path), actors=[Ledger], max_actors=MAX_ACTIVE) as system:
            next_i = 0

            async def sender() -> None:
                nonlocal next_i, peak
                while next_i < len(plan):
                    i = next_i
                    next_i += 1
                    actor_id, n = plan[i]
                    await system.ref(Ledger, actor_id).send(Deposit(n), message_id=f"d{i}")
                    peak = max(peak, system.active_actors)

            async with anyio.create_task_group() as tg:
                for _ in range(SENDERS):
                    tg.start_soon(sender)
            with anyio.fail_after(30):
                while system.active_actors > MAX_ACTIVE:
                    await anyio.sleep(0.05)
            FIGURES["load rss MB (passivated, max_actors=100)"] += round(_rss_mb() - rss0)
            got = await _balances(system, ids)
        for actor_id in ids:
            have = got[actor_id]
            assert (have["count"], have["total"]) == expected[actor_id], actor_id

    anyio.run(live, backend="asyncio")
    FIGURES["load peak loaded actors (passivated)"] += peak
    # far fewer actors were ever loaded at once than exist: a start above the bound wakes
    # the passivator at once, so beyond it are only each sender's newest actor and the ones
    # still writing their passivation snapshot
    assert peak <= MAX_ACTIVE + 2 * SENDERS < n_actors // 2, peak

    async def recovered() -> None:
        async with ActorSystem(SqliteStore(path), actors=[Ledger]) as system:
            got = await _balances(system, ids)
        for actor_id in ids:
            have = got[actor_id]
            assert (have["count"], have["total"]) == expected[actor_id], actor_id

    anyio.run(recovered, backend="asyncio")
