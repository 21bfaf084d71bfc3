"""Every span, attribute and event of docs/tracing.md, checked with the SDK's in-memory exporter.

Live work (step, tool_call, snapshot), trace context carried with messages, and recovery:
replayed steps with links to their original runs, snapshots rejected and why, corruption
(status ERROR plus an event naming actor, seq and check), non-determinism, and every way an
in-doubt intent is settled.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from actorlog import (
    ActorQuarantinedError,
    ActorSystem,
    CorruptEntryError,
    LogCompactedError,
    RecoveryError,
)
from actorlog._tracing.telemetry import ATTR, EVENT, SPAN, record_failure
from actorlog.store import EntryRow, Store
from actorlog.stores import MemoryStore, SqliteStore
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests._payload import payload_of

from .._keys import Key
from .conftest import attrs_of, named, one
from .telemetry_agents import CALLS, Ask, Forward, Relay, Researcher

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


def _children(finished: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [
        s for s in finished if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def _events(span: ReadableSpan, name: str) -> list[dict[str, object]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == name]


async def _ask_n(make_store: StoreFactory, questions: list[str], **spawn: int | None) -> None:
    async with ActorSystem(make_store(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r", **spawn)  # type: ignore[arg-type]
        for i, q in enumerate(questions):
            await ref.ask(Ask(q), message_id=f"q{i}")


#: The question sent as "m1" by the last ``_crash_mid_tool``: asking "m1" again must send the
#: same message (another one under that id is ``MessageIdReusedError``).
CRASHED = [""]


async def _crash_mid_tool(make_store: StoreFactory, tool_name: str, question: str) -> None:
    """Run one step until it hangs inside ``tool_name``, then stop without grace: the tool's
    intent is logged and its result never is (what SIGKILL mid-tool leaves behind)."""
    CALLS.hang = {tool_name}
    CRASHED[0] = question
    async with ActorSystem(make_store(), actors=[Researcher], shutdown_grace=0) as system:
        ref = await system.spawn(Researcher, "r")
        await ref.send(Ask(question), message_id="m1")
        with anyio.fail_after(5):
            await CALLS.started.wait()
    CALLS.hang = set()


# -- live work ---------------------------------------------------------------------------------


async def test_step_and_tool_call_spans_carry_their_attributes(
    spans: InMemorySpanExporter, memory_store: StoreFactory
) -> None:
    async with ActorSystem(memory_store(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Ask("charge:1"), message_id="q1") == "found:charge:1|charged 7"
    finished = spans.get_finished_spans()
    step = one(finished, SPAN.STEP)
    a = attrs_of(step)
    assert a[ATTR.ACTOR_ID] == "r"
    assert a[ATTR.ACTOR_TYPE].endswith("telemetry_agents.Researcher")
    assert a[ATTR.SEQ] == 1
    assert a[ATTR.MESSAGE_TYPE].endswith("telemetry_agents.Ask")
    assert a[ATTR.MESSAGE_ID] == "q1"
    assert a[ATTR.OUTCOME] == "ok"
    assert ATTR.FINISHED_LIVE not in a
    assert step.status.status_code is StatusCode.UNSET

    calls = _children(finished, step)
    assert [s.name for s in calls] == [SPAN.TOOL_CALL, SPAN.TOOL_CALL]
    read, write = (attrs_of(s) for s in calls)
    assert read == {
        ATTR.ACTOR_ID: "r",
        ATTR.SEQ: 1,
        ATTR.TOOL: "search",
        ATTR.TOOL_EFFECT: "read",
        ATTR.TOOL_POLICY: "rerun",
        ATTR.IDEMPOTENCY_KEY: Key("r", 1, 0),
        ATTR.ATTEMPT: 1,
        ATTR.INTENT_SEQ: 2,
        ATTR.SERVED_FROM_LOG: False,
        ATTR.TASK: "",  # the handler's own task
    }
    assert write[ATTR.TOOL] == "charge"
    assert write[ATTR.TOOL_EFFECT] == "write"
    assert write[ATTR.TOOL_POLICY] == "rerun-same-key"
    assert write[ATTR.IDEMPOTENCY_KEY] == Key("r", 1, 1)
    assert write[ATTR.ATTEMPT] == 1
    assert CALLS.log[1] == ("charge", Key("r", 1, 1))


async def test_handler_error_marks_the_step_span_error(
    spans: InMemorySpanExporter, memory_store: StoreFactory
) -> None:
    async with ActorSystem(memory_store(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        with pytest.raises(Exception, match="bad question"):
            await ref.ask(Ask("boom"))
    step = one(spans.get_finished_spans(), SPAN.STEP)
    assert attrs_of(step)[ATTR.OUTCOME] == "error"
    assert step.status.status_code is StatusCode.ERROR
    assert "bad question" in (step.status.description or "")


async def test_step_joins_the_trace_of_the_code_that_called_ask(
    spans: InMemorySpanExporter, memory_store: StoreFactory
) -> None:
    store = memory_store()
    async with ActorSystem(store, actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        with trace.get_tracer("caller").start_as_current_span("caller") as caller:
            await ref.ask(Ask("hello"), message_id="q1")
    ctx = caller.get_span_context()
    step = one(spans.get_finished_spans(), SPAN.STEP)
    assert step.context is not None and step.parent is not None
    assert step.context.trace_id == ctx.trace_id
    assert step.parent.span_id == ctx.span_id
    # the W3C context is stored in the message entry itself
    await store.open()
    message = (await store.read("r", kinds=("message",)))[0]
    carrier = payload_of(message.kind, message.payload)["trace"]
    assert carrier["traceparent"].split("-")[1:3] == [
        format(ctx.trace_id, "032x"),
        format(ctx.span_id, "016x"),
    ]


async def test_message_sent_by_another_actor_joins_the_senders_step_trace(
    spans: InMemorySpanExporter, memory_store: StoreFactory
) -> None:
    async with ActorSystem(memory_store(), actors=[Relay, Researcher]) as system:
        relay = await system.spawn(Relay, "relay")
        await relay.ask(Forward("via relay"))
        with anyio.fail_after(5):
            while not CALLS.log:
                await anyio.sleep(0.01)
        while system.status("r") != "idle":
            await anyio.sleep(0.01)
    finished = spans.get_finished_spans()
    sender = next(s for s in named(finished, SPAN.STEP) if attrs_of(s)[ATTR.ACTOR_ID] == "relay")
    receiver = next(s for s in named(finished, SPAN.STEP) if attrs_of(s)[ATTR.ACTOR_ID] == "r")
    assert sender.context is not None and receiver.context is not None
    assert receiver.parent is not None
    assert receiver.context.trace_id == sender.context.trace_id
    assert receiver.parent.span_id == sender.context.span_id


async def test_snapshot_span_has_seq_bytes_and_duration(
    spans: InMemorySpanExporter, memory_store: StoreFactory
) -> None:
    store = memory_store()
    await _ask_n(memory_store, ["a", "b"], snapshot_every=2)
    snap = one(spans.get_finished_spans(), SPAN.SNAPSHOT)
    a = attrs_of(snap)
    await store.open()
    (info,) = await store.list_snapshots("r")
    assert a[ATTR.ACTOR_ID] == "r"
    assert a[ATTR.ACTOR_TYPE].endswith("telemetry_agents.Researcher")
    assert a[ATTR.SNAPSHOT_SEQ] == info.seq
    assert a[ATTR.SNAPSHOT_HANDLED_SEQ] == info.handled_seq
    assert a[ATTR.SNAPSHOT_BYTES] == info.size > 0
    assert isinstance(a[ATTR.SNAPSHOT_DURATION], float) and a[ATTR.SNAPSHOT_DURATION] >= 0
    assert snap.status.status_code is StatusCode.UNSET


# -- recovery ----------------------------------------------------------------------------------


async def test_recover_span_with_one_linked_replay_step_per_recovered_step(
    spans: InMemorySpanExporter, memory_store: StoreFactory
) -> None:
    await _ask_n(memory_store, ["a", "charge:2", "c"])
    original = {attrs_of(s)[ATTR.SEQ]: s for s in named(spans.get_finished_spans(), SPAN.STEP)}
    store = memory_store()
    await store.open()
    entries = len(await store.read("r"))
    spans.clear()
    CALLS.reset()

    async with ActorSystem(store, actors=[Researcher]) as system:
        await system.spawn(Researcher, "r")
    assert CALLS.log == []  # nothing re-ran: every effect was served from the log
    finished = spans.get_finished_spans()
    recover = one(finished, SPAN.RECOVER)
    assert recover.parent is None
    a = attrs_of(recover)
    assert a[ATTR.ACTOR_ID] == "r"
    assert a[ATTR.ACTOR_TYPE].endswith("telemetry_agents.Researcher")
    assert a[ATTR.SNAPSHOT_SEQ] == 0
    assert a[ATTR.SNAPSHOTS_REJECTED] == 0
    assert a[ATTR.ENTRIES_READ] == entries
    assert a[ATTR.ENTRIES_CUT] == 0
    assert a[ATTR.STEPS_REPLAYED] == 3
    assert a[ATTR.IN_DOUBT] == 0
    assert a[ATTR.PENDING_MESSAGES] == 0
    assert isinstance(a[ATTR.RECOVER_DURATION], float) and a[ATTR.RECOVER_DURATION] > 0
    assert recover.status.status_code is StatusCode.UNSET

    replayed = _children(finished, recover)
    assert [s.name for s in replayed] == [SPAN.REPLAY_STEP] * 3
    assert len(named(finished, SPAN.REPLAY_STEP)) == 3
    assert not named(finished, SPAN.STEP)
    for s, (seq, question) in zip(replayed, sorted(original.items()), strict=True):
        ra = attrs_of(s)
        assert ra[ATTR.ACTOR_ID] == "r"
        assert ra[ATTR.SEQ] == seq
        assert ra[ATTR.MESSAGE_TYPE].endswith("telemetry_agents.Ask")
        assert ra[ATTR.MESSAGE_ID] == attrs_of(question)[ATTR.MESSAGE_ID]
        assert ra[ATTR.OUTCOME] == "ok"
        assert ra[ATTR.FINISHED_LIVE] is False
        # the link points at the span of the step's original run
        (link,) = s.links
        assert question.context is not None
        assert link.context.span_id == question.context.span_id
        assert link.context.trace_id == question.context.trace_id
        assert dict(link.attributes or {}) == {ATTR.LINK_TYPE: "original_run"}
        served = _children(finished, s)
        assert ra[ATTR.EFFECTS_FROM_LOG] == len(served)
        for call in served:
            ca = attrs_of(call)
            assert call.name == SPAN.TOOL_CALL
            assert ca[ATTR.SERVED_FROM_LOG] is True
            assert ca[ATTR.ATTEMPT] == 1
            assert ca[ATTR.SEQ] == seq
    assert [attrs_of(s)[ATTR.EFFECTS_FROM_LOG] for s in replayed] == [1, 2, 1]
    charge = [attrs_of(c) for c in _children(finished, replayed[1])][1]
    assert charge[ATTR.TOOL] == "charge"
    assert charge[ATTR.IDEMPOTENCY_KEY] == Key("r", attrs_of(replayed[1])[ATTR.SEQ], 1)


async def test_a_new_actor_gets_a_recover_span_that_read_nothing(
    spans: InMemorySpanExporter, memory_store: StoreFactory
) -> None:
    """A new actor starts without reading the store; with an SDK its start is still traced:
    one ``actorlog.recover`` span, every count zero, before its first step's span."""
    async with ActorSystem(memory_store(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "new-one")
        await ref.ask(Ask("a"), message_id="q0")
    finished = spans.get_finished_spans()
    recover = one(finished, SPAN.RECOVER)
    assert recover.parent is None and _children(finished, recover) == []
    a = attrs_of(recover)
    assert a[ATTR.ACTOR_ID] == "new-one"
    assert a[ATTR.ACTOR_TYPE].endswith("telemetry_agents.Researcher")
    for name in (ATTR.SNAPSHOT_SEQ, ATTR.SNAPSHOTS_REJECTED, ATTR.ENTRIES_READ):
        assert a[name] == 0
    for name in (ATTR.ENTRIES_CUT, ATTR.STEPS_REPLAYED, ATTR.IN_DOUBT, ATTR.PENDING_MESSAGES):
        assert a[name] == 0
    assert isinstance(a[ATTR.RECOVER_DURATION], float) and a[ATTR.RECOVER_DURATION] >= 0
    assert recover.status.status_code is StatusCode.UNSET
    (step,) = named(finished, SPAN.STEP)
    assert recover.end_time is not None and step.start_time is not None
    assert recover.end_time <= step.start_time


async def test_recover_reports_the_snapshot_used_and_each_rejected_one_with_its_reason(
    spans: InMemorySpanExporter,
) -> None:
    store = MemoryStore()
    await _ask_n(lambda: store, ["a", "b", "c", "d", "e"], snapshot_every=2)
    await store.open()
    newest, older = await store.list_snapshots("r")
    store.replace_snapshot("r", newest.seq, b'{"answers": ["forged"]}')
    spans.clear()

    async with ActorSystem(store, actors=[Researcher]) as system:
        await system.spawn(Researcher, "r")
    recover = one(spans.get_finished_spans(), SPAN.RECOVER)
    a = attrs_of(recover)
    assert a[ATTR.SNAPSHOT_SEQ] == older.seq
    assert a[ATTR.SNAPSHOTS_REJECTED] == 1
    assert a[ATTR.STEPS_REPLAYED] == 3  # steps c, d, e after the older snapshot
    assert _events(recover, EVENT.SNAPSHOT_REJECTED) == [
        {ATTR.SNAPSHOT_SEQ: newest.seq, ATTR.REJECT_REASON: "digest mismatch"}
    ]
    assert recover.status.status_code is StatusCode.UNSET


def _flip_payload(row: EntryRow) -> EntryRow:
    flipped = bytes([row.payload[0] ^ 0x01]) + row.payload[1:]
    return EntryRow(
        row.actor_id,
        row.seq,
        row.kind,
        row.type_tag,
        row.ref,
        row.message_id,
        flipped,
        row.checksum,
    )


async def test_corrupt_entry_sets_status_error_and_an_event_naming_actor_seq_check(
    spans: InMemorySpanExporter,
) -> None:
    store = MemoryStore()
    await _ask_n(lambda: store, ["a", "b"])
    await store.open()
    row = (await store.read("r"))[4]
    store.replace_row("r", row.seq, _flip_payload(row))
    spans.clear()

    async with ActorSystem(store, actors=[Researcher]) as system:
        with pytest.raises(ActorQuarantinedError) as info:
            await system.spawn(Researcher, "r")
    assert isinstance(info.value.__cause__, CorruptEntryError)
    finished = spans.get_finished_spans()
    recover = one(finished, SPAN.RECOVER)
    assert recover.status.status_code is StatusCode.ERROR
    assert f"seq {row.seq}" in (recover.status.description or "")
    (event,) = _events(recover, EVENT.CORRUPTION)
    assert event[ATTR.ACTOR_ID] == "r"
    assert event[ATTR.SEQ] == row.seq
    assert event[ATTR.CHECK] == "checksum"
    assert event[ATTR.ERROR_TYPE] == "CorruptEntryError"
    assert "checksum" in str(event[ATTR.ERROR_MESSAGE])
    assert not named(finished, SPAN.REPLAY_STEP)  # nothing is replayed from a damaged log


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_corrupt_entry_in_a_sqlite_file(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    await _ask_n(lambda: SqliteStore(path), ["a", "b", "c"])
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE entries SET payload = CAST(replace(CAST(payload AS TEXT), 'found', 'fOund') "
            "AS BLOB) WHERE actor_id = 'r' AND seq = 7"
        )
    spans.clear()
    async with ActorSystem(SqliteStore(path), actors=[Researcher]) as system:
        with pytest.raises(ActorQuarantinedError):
            await system.spawn(Researcher, "r")
    recover = one(spans.get_finished_spans(), SPAN.RECOVER)
    assert recover.status.status_code is StatusCode.ERROR
    (event,) = _events(recover, EVENT.CORRUPTION)
    assert (event[ATTR.ACTOR_ID], event[ATTR.SEQ], event[ATTR.CHECK]) == ("r", 7, "checksum")


async def test_nondeterministic_replay_fails_the_recover_span_naming_the_step(
    spans: InMemorySpanExporter, memory_store: StoreFactory
) -> None:
    await _ask_n(memory_store, ["a"])
    spans.clear()
    CALLS.log.clear()
    CALLS.diverge = True
    async with ActorSystem(memory_store(), actors=[Researcher]) as system:
        with pytest.raises(ActorQuarantinedError):
            await system.spawn(Researcher, "r")
    finished = spans.get_finished_spans()
    recover = one(finished, SPAN.RECOVER)
    assert recover.status.status_code is StatusCode.ERROR
    (event,) = _events(recover, EVENT.RECOVERY_FAILED)
    assert event[ATTR.ACTOR_ID] == "r"
    assert event[ATTR.SEQ] == 1
    assert event[ATTR.ERROR_TYPE] == "NonDeterminismError"
    step = one(finished, SPAN.REPLAY_STEP)
    assert step.status.status_code is StatusCode.ERROR
    assert CALLS.log == []  # no tool was called


# -- in doubt ----------------------------------------------------------------------------------


def _in_doubt_recovery(
    finished: tuple[ReadableSpan, ...], tool: str, policy: str, effect: str
) -> tuple[ReadableSpan, ReadableSpan, dict[str, object]]:
    """The recover span (one in-doubt intent, reported with its policy) and the span of the
    interrupted step, which finishes live as the recover span's child. Returns the settled
    event's attributes."""
    recover = one(finished, SPAN.RECOVER)
    a = attrs_of(recover)
    assert a[ATTR.IN_DOUBT] == 1
    assert a[ATTR.STEPS_REPLAYED] == 0
    assert a[ATTR.PENDING_MESSAGES] == 1
    (doubt,) = _events(recover, EVENT.IN_DOUBT)
    assert doubt == {
        ATTR.SEQ: 1,
        ATTR.INTENT_SEQ: 4,  # message 1, search intent 2, its result 3, this intent 4
        ATTR.TOOL: tool,
        ATTR.TOOL_EFFECT: effect,
        ATTR.TOOL_POLICY: policy,
        ATTR.IDEMPOTENCY_KEY: Key("r", 1, 1),
        ATTR.ATTEMPT: 1,  # the first run left no outcome
        ATTR.TASK: "",  # the handler's own task
    }
    (step,) = _children(finished, recover)
    assert step.name == SPAN.REPLAY_STEP
    sa = attrs_of(step)
    assert sa[ATTR.FINISHED_LIVE] is True
    assert sa[ATTR.SEQ] == 1
    assert sa[ATTR.OUTCOME] == "ok"
    # only the search result came from the log: the in-doubt call was settled live (re-run,
    # reconciled or decided by an operator), never served from the log
    assert sa[ATTR.EFFECTS_FROM_LOG] == 1
    (settled,) = _events(step, EVENT.SETTLED)
    assert settled[ATTR.INTENT_SEQ] == 4
    assert settled[ATTR.TOOL] == tool
    assert settled[ATTR.TOOL_POLICY] == policy
    served = [attrs_of(c) for c in _children(finished, step)]
    assert served[0][ATTR.TOOL] == "search" and served[0][ATTR.SERVED_FROM_LOG] is True
    return recover, step, settled


async def _finish(make_store: StoreFactory) -> str:
    async with ActorSystem(make_store(), actors=[Researcher]) as system:
        with anyio.fail_after(5):
            return str(await system.ref(Researcher, "r").ask(Ask(CRASHED[0]), message_id="m1"))


@pytest.mark.parametrize(
    ("tool", "question", "policy", "effect", "reconcile", "settlement", "reran"),
    [
        ("slow_read", "read:1", "rerun", "read", None, "rerun", True),
        ("charge", "charge:1", "rerun-same-key", "write", None, "rerun-same-key", True),
        ("pay", "pay:1", "reconcile", "write", "happened", "reconcile.happened", False),
        ("pay", "pay:1", "reconcile", "write", "not", "reconcile.not_happened", True),
    ],
)
async def test_in_doubt_intent_settled_by_its_policy(
    spans: InMemorySpanExporter,
    memory_store: StoreFactory,
    tool: str,
    question: str,
    policy: str,
    effect: str,
    reconcile: str | None,
    settlement: str,
    reran: bool,
) -> None:
    await _crash_mid_tool(memory_store, tool, question)
    spans.clear()
    CALLS.reconcile_answer = reconcile
    await _finish(memory_store)
    finished = spans.get_finished_spans()
    _, step, settled = _in_doubt_recovery(finished, tool, policy, effect)
    assert settled[ATTR.SETTLEMENT] == settlement
    calls = [attrs_of(c) for c in _children(finished, step)]
    if reran:
        rerun = calls[1]
        assert rerun[ATTR.TOOL] == tool
        assert rerun[ATTR.SERVED_FROM_LOG] is False
        assert rerun[ATTR.ATTEMPT] == 2
        assert rerun[ATTR.INTENT_SEQ] == 4
        assert rerun[ATTR.IDEMPOTENCY_KEY] == Key("r", 1, 1)
    else:
        assert len(calls) == 1  # reconcile said it happened: the tool was not run again


async def test_in_doubt_plain_write_escalates_and_the_operator_decision_is_traced(
    spans: InMemorySpanExporter, memory_store: StoreFactory
) -> None:
    await _crash_mid_tool(memory_store, "send_email", "email:ops")
    spans.clear()
    async with ActorSystem(memory_store(), actors=[Researcher]) as system:
        with anyio.fail_after(5):
            waiting = await system.wait_in_doubt("r")
        assert waiting == {4: ("send_email", Key("r", 1, 1))}
        recover = one(spans.get_finished_spans(), SPAN.RECOVER)  # ended; the step waits
        assert attrs_of(recover)[ATTR.IN_DOUBT] == 1
        await system.resolve("r", 4, result="sent by hand", by="ops", reason="saw it in the outbox")
        with anyio.fail_after(5):
            reply = await system.ref(Researcher, "r").ask(Ask(CRASHED[0]), message_id="m1")
        assert reply == "found:email:ops|sent by hand"
    finished = spans.get_finished_spans()
    _, _, settled = _in_doubt_recovery(finished, "send_email", "escalate", "write")
    assert settled[ATTR.SETTLEMENT] == "operator.result"
    assert settled[ATTR.DECIDED_BY] == "ops"
    assert settled[ATTR.DECISION_REASON] == "saw it in the outbox"
    assert [c[0] for c in CALLS.log].count("send_email") == 1  # before the crash; never re-sent


@pytest.mark.parametrize(
    ("how", "settlement"), [("retry", "operator.retry"), ("fail", "operator.fail")]
)
async def test_in_doubt_operator_retry_and_fail_are_traced(
    spans: InMemorySpanExporter, memory_store: StoreFactory, how: str, settlement: str
) -> None:
    await _crash_mid_tool(memory_store, "send_email", "email:ops")
    spans.clear()
    async with ActorSystem(memory_store(), actors=[Researcher]) as system:
        with anyio.fail_after(5):
            await system.wait_in_doubt("r")
        if how == "retry":
            await system.resolve("r", 4, retry=True, by="ops")
        else:
            await system.resolve("r", 4, fail="never sent", by="ops")
        with anyio.fail_after(5):
            try:
                await system.ref(Researcher, "r").ask(Ask(CRASHED[0]), message_id="m1")
            except Exception as exc:
                assert how == "fail" and "never sent" in str(exc)
    finished = spans.get_finished_spans()
    step = one(finished, SPAN.REPLAY_STEP)
    (settled,) = _events(step, EVENT.SETTLED)
    assert settled[ATTR.SETTLEMENT] == settlement
    assert settled[ATTR.DECIDED_BY] == "ops"
    if how == "retry":
        rerun = attrs_of(_children(finished, step)[1])
        assert (rerun[ATTR.TOOL], rerun[ATTR.ATTEMPT]) == ("send_email", 2)
    else:
        assert attrs_of(step)[ATTR.OUTCOME] == "error"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_failure_event_names_corruption_only_for_damaged_entries(
    spans: InMemorySpanExporter,
) -> None:
    tracer = trace.get_tracer("t")
    errors = [
        CorruptEntryError("a", 7, "seq chain", "gap"),
        LogCompactedError("a", 40),
        RecoveryError("a", 9, "a step completed after an unfinished one"),
    ]
    for exc in errors:
        with tracer.start_as_current_span("recover") as span:
            record_failure(span, exc, "a")
    corrupt, compacted, other = spans.get_finished_spans()
    assert all(s.status.status_code is StatusCode.ERROR for s in (corrupt, compacted, other))
    assert _events(corrupt, EVENT.CORRUPTION) == [
        {
            ATTR.ACTOR_ID: "a",
            ATTR.SEQ: 7,
            ATTR.CHECK: "seq chain",
            ATTR.ERROR_TYPE: "CorruptEntryError",
            ATTR.ERROR_MESSAGE: str(errors[0]),
        }
    ]
    assert _events(compacted, EVENT.RECOVERY_FAILED)[0][ATTR.ERROR_TYPE] == "LogCompactedError"
    assert _events(other, EVENT.RECOVERY_FAILED)[0][ATTR.SEQ] == 9


async def test_a_retried_call_is_one_span_with_an_event_per_failed_attempt(
    spans: InMemorySpanExporter, memory_store: Callable[[], Store]
) -> None:
    """docs/tracing.md, "Retries": one tool_call span, one attempt_failed event per failed
    attempt, live and served from the log on replay."""
    from tests.effects import test_retry as agents

    agents.RUNS.clear()
    agents.FAIL["flaky_read"] = 2
    try:
        async with ActorSystem(memory_store(), actors=[agents.Caller]) as system:
            ref = await system.spawn(agents.Caller, "r1")
            assert await ref.ask(agents.Use("flaky_read"), message_id="m1") == (
                "flaky_read ok on run 3"
            )
        (live,) = named(spans.get_finished_spans(), SPAN.TOOL_CALL)
        assert attrs_of(live)[ATTR.ATTEMPT] == 3
        assert attrs_of(live)[ATTR.MAX_ATTEMPTS] == 4
        events = [e for e in live.events if e.name == EVENT.ATTEMPT_FAILED]
        assert [dict(e.attributes or {}) for e in events] == [
            {
                ATTR.ATTEMPT: n,
                ATTR.ERROR_TYPE: "ValueError",
                ATTR.ERROR_MESSAGE: f"flaky_read failure {n}",
                ATTR.RETRY_DELAY: delay,
                ATTR.ATTEMPT_IN_DOUBT: False,
            }
            for n, delay in ((1, 0.01), (2, 0.02))
        ]
        spans.clear()
        async with ActorSystem(memory_store(), actors=[agents.Caller]) as system:
            await system.spawn(agents.Caller, "r1")  # recovery replays the step
        (served,) = named(spans.get_finished_spans(), SPAN.TOOL_CALL)
        assert attrs_of(served)[ATTR.SERVED_FROM_LOG] is True
        assert [e.attributes for e in served.events if e.name == EVENT.ATTEMPT_FAILED] == [
            e.attributes for e in events
        ]
        assert len(agents.RUNS["flaky_read"]) == 3  # replay ran nothing
    finally:
        agents.FAIL.clear()
        agents.RUNS.clear()
