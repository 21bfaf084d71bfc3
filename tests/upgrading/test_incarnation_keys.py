"""Idempotency keys are unique per actor incarnation (issue 29 item 1, FORMAT.md [F13]):
a random incarnation id, recorded in every message entry, is part of every key; it stays
across replays, restarts and an in-doubt re-run after SIGKILL, is new after ``delete`` and a
new actor under the same id, in a fresh store and in a fork; a log recorded before
incarnations existed keeps its old keys (``fixtures/payer_before_incarnations.jsonl``)."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem, ops
from actorlog._journal.codec import encode_plain, verify_row
from actorlog._journal.records import IntentRecord, MessageRecord, decode_entry
from actorlog.store import EntryRow, Store
from actorlog.stores import MemoryStore, SqliteStore

from .._keys import Key, incarnation_of
from .agents import KEYS, KILL_IN_CHARGE, Payer, Question

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]
ROOT = Path(__file__).resolve().parents[2]
OLD_LOG = Path(__file__).parent / "fixtures" / "payer_before_incarnations.jsonl"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    KEYS.clear()
    KILL_IN_CHARGE.clear()
    yield
    KEYS.clear()
    KILL_IN_CHARGE.clear()


async def _ask(store: Store, actor_id: str, *questions: str) -> list[str]:
    async with ActorSystem(store, actors=[Payer]) as system:
        ref = await system.spawn(Payer, actor_id, snapshot_every=1000)
        return [await ref.ask(Question(q), message_id=q) for q in questions]


async def _message_incarnations(store: Store, actor_id: str) -> list[str | None]:
    await store.open()
    try:
        rows = await store.read(actor_id, kinds=("message",))
    finally:
        await store.close()
    out = []
    for r in rows:
        rec = decode_entry(r)
        assert isinstance(rec, MessageRecord)
        out.append(rec.incarnation)
    return out


async def test_a_deleted_and_recreated_actor_gets_new_keys(make_store: StoreFactory) -> None:
    await _ask(make_store(), "c1", "a")
    async with ActorSystem(make_store(), actors=[Payer]) as system:
        await system.delete("c1", force=True, reason="test")
    await _ask(make_store(), "c1", "a")
    first, second = KEYS
    assert first == Key("c1", 1, 0) and second == Key("c1", 1, 0)
    assert first != second  # a provider deduplicating by key sees a new charge


async def test_a_fresh_store_gets_new_keys(make_store: StoreFactory) -> None:
    await _ask(make_store(), "c1", "a")
    await _ask(MemoryStore(), "c1", "a")
    assert KEYS[0] != KEYS[1] and [Key("c1", 1, 0)] * 2 == KEYS


async def test_the_incarnation_stays_across_restarts_and_replays(
    make_store: StoreFactory,
) -> None:
    await _ask(make_store(), "c1", "a")
    await _ask(make_store(), "c1", "b")  # recovery replays step 1 (no snapshot)
    await _ask(make_store(), "c1", "c")
    assert [Key("c1", 1, 0), Key("c1", 5, 0), Key("c1", 9, 0)] == KEYS  # none ran twice
    assert len({incarnation_of(k) for k in KEYS}) == 1
    # it is recorded in every message entry, and history shows the keys the calls ran with
    assert await _message_incarnations(make_store(), "c1") == [incarnation_of(KEYS[0])] * 3
    store = make_store()
    await store.open()
    try:
        calls = [c for s in (await ops.history(store, "c1")).steps for c in s.calls]
    finally:
        await store.close()
    assert [c.key for c in calls] == KEYS


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_fork_is_a_new_incarnation() -> None:
    store = MemoryStore()
    await _ask(store, "c1", "a")
    await store.open()
    await ops.fork(store, "c1", at=1, new_id="c2", yes=True)
    await store.close()
    await _ask(store, "c2", "b")  # finishes the copied step 1 (live), then b
    assert [k.split(":")[0] for k in KEYS] == ["c1", "c2", "c2"]
    assert incarnation_of(KEYS[1]) != incarnation_of(KEYS[0])
    assert incarnation_of(KEYS[1]) == incarnation_of(KEYS[2])


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_in_doubt_rerun_after_sigkill_uses_the_same_key(tmp_path: Path) -> None:
    """A real process, SIGKILLed inside an idempotent write; the restart re-runs it with the
    key its intent recorded."""
    db = tmp_path / "kill.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests.upgrading.make_keys_fixture", "record", str(db)]
    with anyio.fail_after(120):
        child = await anyio.run_process(cmd, cwd=ROOT, env=env, check=False)
    assert child.returncode == -signal.SIGKILL, child.stderr
    store = SqliteStore(db)
    await store.open()
    try:
        (actor,) = await ops.list_actors(store)
        (doubt,) = actor.in_doubt
    finally:
        await store.close()
    assert doubt.key == Key("pay-1", 5, 0)
    await _ask(SqliteStore(db), "pay-1", "q2", "q3")
    # q2's re-run is marked started first (an ``attempt`` decision at seq 7, FORMAT.md
    # "Decisions"), then its result (8) and step (9): q3 is the message at seq 10
    assert [doubt.key, Key("pay-1", 10, 0)] == KEYS
    assert incarnation_of(KEYS[1]) == incarnation_of(doubt.key)


async def _load_old_log(store: Store) -> None:
    """The fixture's rows as the old runtime stored them (checksums included)."""
    lines = [json.loads(x) for x in OLD_LOG.read_text().splitlines()]
    head, entries = lines[0], lines[1:]
    rows = []
    for e in entries:
        row = EntryRow(
            head["actor_id"],
            e["seq"],
            e["kind"],
            e["type_tag"],
            e["ref"],
            e["message_id"],
            encode_plain(e["payload"], "payload"),
            e["checksum"],
        )
        verify_row(row, head["actor_id"], e["seq"])  # the very bytes the old code wrote
        rows.append(row)
    await store.open()
    try:
        await store.register_actor(head["actor_id"], head["actor_type"])
        await store.append(head["actor_id"], 0, rows)
    finally:
        await store.close()


async def test_an_old_log_keeps_its_keys(make_store: StoreFactory) -> None:
    await _load_old_log(make_store())
    store = make_store()
    await store.open()
    try:
        (doubt,) = (await ops.actor_status(store, "pay-1")).in_doubt
    finally:
        await store.close()
    assert doubt.key == "pay-1:5:0"
    # the in-doubt call re-runs with its old key; a message logged now starts an incarnation
    assert await _ask(make_store(), "pay-1", "q2", "q3") == ["charged q2", "charged q3"]
    # the re-run writes an ``attempt`` decision first (new writes only: the fixture's rows
    # and keys are as recorded), so q3's message is at seq 10
    assert ["pay-1:5:0", Key("pay-1", 10, 0)] == KEYS
    store = make_store()
    await store.open()
    try:
        calls = [c for s in (await ops.history(store, "pay-1")).steps for c in s.calls]
        intents = [decode_entry(r) for r in await store.read("pay-1", kinds=("intent",))]
    finally:
        await store.close()
    assert [c.key for c in calls] == ["pay-1:1:0", "pay-1:5:0", KEYS[1]]
    assert [i.key for i in intents if isinstance(i, IntentRecord)] == [c.key for c in calls]
    assert await _message_incarnations(make_store(), "pay-1") == [
        None,
        None,
        incarnation_of(KEYS[1]),
    ]
