"""PostgreSQL reports damage in its own files (a page of a table or of an index it cannot
read): every read names it ``StoreCorruptError`` (not the transient
``StoreUnavailableError``), recovery quarantines the actor with it, and ``verify`` reports it
as that actor's finding (issue 24 item 17).

The damage is real: bytes of the server's data files changed while it is stopped, on a server
of the test's own (``tests/_pgserver.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os

import anyio
import asyncpg
import pytest
from actorlog import ActorQuarantinedError, ActorSystem, StoreCorruptError, ops
from actorlog.cli._main import main as cli_main
from actorlog.stores import PostgresStore

from tests._pgserver import CrashableServer
from tests.torture.helpers import Add, Counter, Get

PAGE = 8192


async def _build(url: str) -> None:
    async with ActorSystem(PostgresStore(url), actors=[Counter]) as system:
        ref = await system.spawn(Counter, "victim", snapshot_every=100)
        for n in range(1, 6):
            await ref.ask(Add(n), message_id=f"m-{n}")


async def _relation_file(url: str, relation: str) -> str:
    conn = await asyncpg.connect(url)
    try:
        path = await conn.fetchval("SELECT pg_relation_filepath($1::regclass)", relation)
        if relation != "entries":  # make the planner read entries through its index
            await conn.execute("ALTER DATABASE postgres SET enable_seqscan = off")
            await conn.execute("ALTER DATABASE postgres SET enable_bitmapscan = off")
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()
    return str(path)


def _damage(path: str, relation: str) -> None:
    with open(path, "r+b") as f:
        if relation == "entries":
            # block 0's pd_lower past pd_upper: a page header the server refuses (XX001)
            f.seek(12)
            f.write(b"\xff\xff")
        else:
            # the index's first page after its metapage, zeroed (XX002)
            f.seek(PAGE)
            f.write(bytes(PAGE))


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = cli_main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("relation", "sqlstate"), [("entries", "XX001"), ("entries_pkey", "XX002")]
)
def test_a_page_the_server_cannot_read_is_store_corrupt(
    own_server: CrashableServer, relation: str, sqlstate: str
) -> None:
    anyio.run(_build, own_server.url, backend="asyncio")
    path = os.path.join(own_server.data, anyio.run(_relation_file, own_server.url, relation))
    own_server.stop()
    _damage(path, relation)
    own_server.start()

    async def reads() -> None:
        store = PostgresStore(own_server.url, read_only=True)
        await store.open()
        try:
            with pytest.raises(StoreCorruptError) as info:
                await store.read("victim")
            assert getattr(info.value.__cause__, "sqlstate", None) == sqlstate
            assert "127.0.0.1" in str(info.value)
            with pytest.raises(StoreCorruptError):
                await ops.history(store, "victim")
        finally:
            await store.close()

    anyio.run(reads, backend="asyncio")

    async def recover() -> BaseException:
        async with ActorSystem(PostgresStore(own_server.url), actors=[Counter]) as system:
            try:
                ref = await system.spawn(Counter, "victim")
                await ref.ask(Get(), timeout=30)
            except ActorQuarantinedError as exc:
                assert exc.__cause__ is not None
                return exc.__cause__
            except StoreCorruptError as exc:
                return exc
        raise AssertionError("the damaged actor recovered")

    assert isinstance(anyio.run(recover, backend="asyncio"), StoreCorruptError)

    code, out, err = _cli("verify", own_server.url, "--json")
    assert code == 1, (out, err)
    findings = json.loads(out)["findings"]
    assert [(f["actor_id"], f["check"]) for f in findings] == [("victim", "integrity")]
