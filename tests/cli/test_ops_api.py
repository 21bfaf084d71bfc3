"""``actorlog.ops`` as a Python API, over any store (here the in-process MemoryStore)."""

from __future__ import annotations

import anyio
import pytest
from actorlog import ActorlogError, ActorSystem, ConfigurationError, HandlerError, ops
from actorlog.stores import MemoryStore

from ._agents import Auditor, Biller, Job, crash_mid_call, ran

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()


async def test_status_history_resolve_and_recovery_in_process() -> None:
    store = MemoryStore()
    await crash_mid_call(store)
    await store.open()  # the system closed it; a MemoryStore keeps its data
    (a,) = await ops.list_actors(store)
    assert (a.actor_id, a.status, a.pending_messages) == ("bill-1", "in_doubt", 1)
    (doubt,) = a.in_doubt
    assert (doubt.tool, doubt.policy, doubt.needs_operator) == ("charge_card", "escalate", True)

    h = await ops.history(store, "bill-1")
    assert [s.status for s in h.steps] == ["ok", "in_doubt"]
    assert h.steps[1].calls[0].intent_seq == doubt.intent_seq
    assert ops.to_json(h.steps[1])["calls"][0]["status"] == "in_doubt"

    d = await ops.resolve(
        store,
        "bill-1",
        doubt.intent_seq,
        result="charged hang (by hand)",
        by="carol",
        reason="seen in the payment provider's dashboard",
    )
    assert (d.action, d.by) == ("result", "carol")
    with pytest.raises(ConfigurationError):
        await ops.resolve(store, "bill-1", doubt.intent_seq, retry=True)

    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            assert await ref.ask(Job("hang"), message_id="m2") == "charged hang (by hand)"
    await store.open()
    assert ran == ["first", "hang"]  # the in-doubt call was not repeated
    assert (await ops.actor_status(store, "bill-1")).status == "idle"
    report = await ops.verify(store)
    assert report.ok and report.entries == (await store.get_actor("bill-1")).last_seq  # type: ignore[union-attr]  # it exists


async def test_verify_reports_progress() -> None:
    store = MemoryStore()
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-2")
        for i in range(3):
            await ref.ask(Job(f"j{i}"), message_id=f"m{i}")
    await store.open()
    seen: list[tuple[str, int, int]] = []
    report = await ops.verify(store, progress=lambda a, done, total: seen.append((a, done, total)))
    assert report.ok
    assert seen[-1] == ("bill-2", report.entries, report.entries)


async def test_fork_effects_list_sends_and_writes() -> None:
    store = MemoryStore()
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-3")
        await ref.ask(Job("a"), message_id="m1")
        await ref.ask(Job("notify"), message_id="m2")
    await store.open()
    effects, warnings = await ops.fork_effects(store, "bill-3", 1)
    assert warnings == []
    assert [(e.kind, e.name, e.outcome, e.repeated_by_fork) for e in effects] == [
        ("tool", "charge_card", "ok", True),
        ("tool", "charge_card", "ok", False),
        ("send", "auditor", "ok", False),
    ]
    with pytest.raises(ops.ForkRefusedError) as info:
        await ops.fork(store, "bill-3", at=1, new_id="bill-3b")
    assert len(info.value.effects) == 3
    assert await store.get_actor("bill-3b") is None
    r = await ops.fork(store, "bill-3", at=1, new_id="bill-3b", yes=True)
    assert (r.entries_copied, r.snapshot_seq) == (1, None)
    # the fork has the message logged at seq 1 and will handle it when run
    fork_status = await ops.actor_status(store, "bill-3b")
    assert (fork_status.status, fork_status.pending_messages) == ("running", 1)
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-3b")
        with anyio.fail_after(5):
            assert await ref.ask(Job("a"), message_id="m1") == "charged a"
    assert ran == ["a", "notify", "a"]


async def test_export_yields_header_entries_snapshots_events() -> None:
    store = MemoryStore()
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-4", snapshot_every=1)
        await ref.ask(Job("x"), message_id="m1")
    await store.open()
    items = [i async for i in ops.export(store, "bill-4")]
    assert items[0]["type"] == "actor"
    assert [i["kind"] for i in items if i["type"] == "entry"] == [
        "message",
        "intent",
        "result",
        "step",
    ]
    snaps = [i for i in items if i["type"] == "snapshot"]
    assert snaps and snaps[0]["valid"] and snaps[0]["state"] == {"done": ["charged x"]}


async def test_offline_resolve_next_to_a_live_runtime() -> None:
    """What docs/operators.md says: a runtime waiting on the intent does not see an offline
    decision, its next write to the actor conflicts and stops it (status ``stopped``), and the
    next start recovers with the decision."""
    store = MemoryStore()
    await crash_mid_call(store)
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            (seq,) = await system.wait_in_doubt("bill-1")
        await ops.resolve(store, "bill-1", seq, fail="never charged", by="dave")
        assert system.in_doubt("bill-1")  # still waiting: it does not re-read the log
        with pytest.raises(ActorlogError):
            await ref.send(Job("later"), message_id="m3")
        with anyio.fail_after(5):
            while (await ops.actor_status(store, "bill-1")).status != "stopped":
                await anyio.sleep(0.01)
        events = (await ops.history(store, "bill-1")).events
        assert any(e.detail.get("error_type") == "SequenceConflictError" for e in events)
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5), pytest.raises(HandlerError, match="never charged"):
            await ref.ask(Job("hang"), message_id="m2")
    await store.open()
    assert (await ops.actor_status(store, "bill-1")).status == "idle"
    assert ran == ["first", "hang"]


async def test_fork_effects_refuses_a_point_outside_the_log_as_fork_does() -> None:
    """``fork_effects`` previews ``fork``: a seq the log does not hold (0, past its end) is
    the same ConfigurationError at the call, not an empty list of effects."""
    store = MemoryStore()
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-9")
        await ref.ask(Job("a"), message_id="m1")
    await store.open()
    last = (await store.get_actor("bill-9")).last_seq  # type: ignore[union-attr]
    for at in (0, -1, last + 1, 10**30):
        for call in (
            ops.fork_effects(store, "bill-9", at),
            ops.fork(store, "bill-9", at=at, new_id="bill-9b"),
        ):
            with pytest.raises(ConfigurationError, match=r"^at must be between 1 and"):
                await call
    assert await store.get_actor("bill-9b") is None
    effects, _ = await ops.fork_effects(store, "bill-9", last)
    assert effects == []
