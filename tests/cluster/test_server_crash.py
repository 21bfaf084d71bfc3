"""PostgreSQL itself crashes (SIGKILL of every server process) under a stream of asks and
comes back (crash recovery): the same runtime goes on without a restart, nothing
acknowledged is lost, nothing is handled twice, and the log verifies.

The server is the test's own (``tests/_pgserver.py``), durable (``fsync``,
``synchronous_commit`` on): the shared test server runs without them.
"""

from __future__ import annotations

import anyio
import pytest
from actorlog import (
    ActorlogError,
    ActorSystem,
    LeaseLostError,
    StoreUnavailableError,
    ops,
)
from actorlog.stores import PostgresStore

from tests._pgserver import CrashableServer

from .agents import LEDGER, Account, Deposit

pytestmark = pytest.mark.anyio

ACTORS = 6
PER_ACTOR = 25


@pytest.mark.parametrize("owner", [None, "runtime-a"])
async def test_server_crash_mid_stream_loses_nothing_and_repeats_nothing(
    own_server: CrashableServer, owner: str | None
) -> None:
    LEDGER.clear()
    done = [0]
    errors: list[BaseException] = []
    progress = anyio.Event()

    async with ActorSystem(
        PostgresStore(own_server.url),
        actors=[Account],
        owner=owner,
        lease_ttl=2.0,
        poll_interval=0.05,
        shutdown_grace=1.0,
    ) as system:

        async def sender(a: int) -> None:
            ref = system.ref(Account, f"acct-{a}")
            for n in range(1, PER_ACTOR + 1):
                while True:  # ask until answered; the same id makes a retry exactly once
                    try:
                        reply = await ref.ask(Deposit(1), message_id=f"{a}-{n}", timeout=5)
                    except (ActorlogError, TimeoutError) as exc:
                        errors.append(exc)
                        await anyio.sleep(0.05)
                        continue
                    break
                # one deposit of 1 per message: the n-th message's reply is n, unless an
                # acknowledged message was lost (less) or one was handled twice (more)
                assert reply == n, f"acct-{a} message {n} answered {reply}"
                done[0] += 1
                if done[0] == ACTORS * 5:
                    progress.set()

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for a in range(ACTORS):
                    tg.start_soon(sender, a)
                await progress.wait()
                own_server.crash()
                await anyio.sleep(1.0)  # the senders meet the outage
                failed_during = len(errors)
                own_server.start()
        assert done[0] == ACTORS * PER_ACTOR

    # the outage surfaced at the call that met it as the store's own error (or, with
    # leases, a lost lease), never as a quarantine: nothing is wrong with the log
    assert failed_during > 0
    for exc in errors:
        assert isinstance(exc, (StoreUnavailableError, LeaseLostError, TimeoutError)), repr(exc)

    # every step once, every idempotent write once, and the log verifies after recovery
    assert len({key for key, _ in LEDGER}) == ACTORS * PER_ACTOR
    store = PostgresStore(own_server.url)
    await store.open()
    try:
        report = await ops.verify(store)
        assert report.ok, report.findings
        for a in range(ACTORS):
            steps = await store.read(f"acct-{a}", kinds=["step"])
            assert len(steps) == PER_ACTOR
    finally:
        await store.close()
    async with ActorSystem(PostgresStore(own_server.url), actors=[Account]) as system:
        ref = system.ref(Account, "acct-0")
        assert await ref.ask(Deposit(1), message_id="0-1") == 1  # recorded reply, no new step
        assert await ref.ask(Deposit(1)) == PER_ACTOR + 1
