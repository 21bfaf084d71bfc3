"""Retry and timeout policies on tools (issue 14, part 1), on every store.

Each attempt is logged before the next starts (an ``attempt_failed`` decision with the error
and the delay chosen, then an ``attempt`` marker); the final failure is the recorded result
the handler sees; the idempotency key is the same across attempts; replay serves what was
recorded without running the tool or sleeping; a timed-out write is in doubt and goes by its
tool's in-doubt policy before another attempt.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import anyio
import attrs
import pytest
from actorlog import (
    Actor,
    ActorSystem,
    ConfigurationError,
    Context,
    Happened,
    InDoubtError,
    Retry,
    Tool,
    ToolCallError,
    ToolTimeoutError,
    tool,
)
from actorlog._journal.records import DecisionRecord, Record, ResultRecord, decode_entry
from actorlog.store import Store

from tests._keys import Key

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]

#: per tool: the arguments (and keys) of every run, in order
RUNS: dict[str, list[Any]] = {}
#: per tool: how many of its first runs fail (ValueError) or hang (a timeout)
FAIL: dict[str, int] = {}
HANG: dict[str, int] = {}
#: per tool: the numbers of the runs that hang (a crash happens while they run)
HANG_AT: dict[str, set[int]] = {}
#: what reconcile answers
RECONCILE: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _reset() -> None:
    for d in (RUNS, FAIL, HANG, HANG_AT, RECONCILE):
        d.clear()


async def _behave(name: str, record: Any) -> str:
    runs = RUNS.setdefault(name, [])
    runs.append(record)
    n = len(runs)
    if n <= HANG.get(name, 0) or n in HANG_AT.get(name, ()):
        await anyio.sleep_forever()
    if n <= FAIL.get(name, 0):
        raise ValueError(f"{name} failure {n}")
    return f"{name} ok on run {n}"


FAST = Retry(attempts=4, initial=0.01, factor=2.0, jitter=False)


@tool(effect="read", retry=FAST, name="flaky_read")
async def flaky_read(q: str) -> str:
    return await _behave("flaky_read", q)


@tool(effect="write", idempotent=True, retry=FAST, timeout=0.3, name="charge")
async def charge(amount: int, *, idempotency_key: str) -> str:
    return await _behave("charge", idempotency_key)


@tool(effect="read", retry=Retry(attempts=3, initial=0.0, on=KeyError), name="picky")
async def picky(q: str) -> str:
    return await _behave("picky", q)


@tool(effect="read", retry=Retry(attempts=2, initial=0.0), timeout=0.2, name="slow_read")
async def slow_read(q: str) -> str:
    return await _behave("slow_read", q)


@tool(effect="write", retry=Retry(attempts=3, initial=0.0), timeout=0.2, name="send_mail")
async def send_mail(to: str) -> str:
    return await _behave("send_mail", to)


async def _reconcile(key: str, args: dict[str, Any]) -> Any:
    return RECONCILE.get("answer")


@tool(
    effect="write",
    retry=Retry(attempts=3, initial=0.0),
    timeout=0.2,
    reconcile=_reconcile,
    name="book",
)
async def book(what: str) -> str:
    return await _behave("book", what)


@tool(effect="read", name="plain_read")
async def plain_read(q: str) -> str:
    return await _behave("plain_read", q)


TOOLS: dict[str, Tool[..., str]] = {
    "flaky_read": flaky_read,
    "charge": charge,
    "picky": picky,
    "slow_read": slow_read,
    "send_mail": send_mail,
    "book": book,
    "plain_read": plain_read,
}


@attrs.define
class Use:
    tool: str
    arg: str = "x"
    #: per-call options: (attempts, timeout) or None
    options: tuple[int, float | None] | None = None


@attrs.define
class Seen:
    outcomes: list[str] = attrs.Factory(list)


class Caller(Actor[Seen]):
    async def receive(self, ctx: Context, msg: Use) -> str:
        if msg.tool == "state":  # what the handler saw, as the state (replayed) holds it
            return " | ".join(self.state.outcomes)
        try:
            if msg.tool == "plain_read" and msg.options is not None:
                attempts, timeout = msg.options
                t = plain_read.with_options(
                    retry=Retry(attempts=attempts, initial=0.0), timeout=timeout
                )
                got = await ctx.call(t, msg.arg)
            elif msg.tool == "charge":
                got = await ctx.call(charge, 5)
            else:
                got = await ctx.call(TOOLS[msg.tool], msg.arg)
        except ToolCallError as exc:
            got = f"error {exc.error_type}: {exc.message}"
        self.state.outcomes.append(got)
        return got


async def _log(store: Store, actor_id: str) -> list[tuple[str, str, Record]]:
    """(kind, type tag, record) of the actor's result and decision entries, in order."""
    await store.open()
    try:
        rows = await store.read(actor_id, kinds=["result", "decision"])
    finally:
        await store.close()
    return [(r.kind, r.type_tag, decode_entry(r)) for r in rows]


async def _ask(make_store: StoreFactory, actor_id: str, msg: Use, mid: str = "m1") -> str:
    async with ActorSystem(make_store(), actors=[Caller]) as system:
        ref = await system.spawn(Caller, actor_id)
        with anyio.fail_after(20):
            return await ref.ask(msg, message_id=mid)  # type: ignore[no-any-return]


# -- configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Retry(attempts=0),
        lambda: Retry(attempts=2.5),  # type: ignore[arg-type]
        lambda: Retry(attempts=True),
        lambda: Retry(initial=-1),
        lambda: Retry(initial=float("nan")),
        lambda: Retry(factor=0.5),
        lambda: Retry(max_delay=-2),
        lambda: Retry(jitter="yes"),  # type: ignore[arg-type]
        lambda: Retry(on="ValueError"),  # type: ignore[arg-type]
        lambda: Retry(on=()),
        lambda: tool(retry=3),  # type: ignore[call-overload]
        lambda: tool(timeout=0),
        lambda: tool(timeout=float("inf")),
        lambda: tool(timeout="5"),  # type: ignore[call-overload]
        lambda: plain_read.with_options(timeout=-1),
        lambda: plain_read.with_options(retry=Retry),  # type: ignore[arg-type]
    ],
)
def test_bad_policies_fail_at_the_decorator_or_call(make: Callable[[], Any]) -> None:
    with pytest.raises(ConfigurationError):
        make()


async def _typed(x: int) -> int:
    return x


def _retry(*args: Any, **kw: Any) -> Retry:
    return Retry(*args, **kw)


def _tool(**kw: Any) -> Any:
    return tool(**kw)(_typed)


def _with_options(**kw: Any) -> Any:
    return plain_read.with_options(**kw)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        # issue 24 item 7: an instance for a class was a bare TypeError ("not iterable")
        (lambda: _retry(on=ValueError("x")), "pass the class, on=ValueError, not an instance"),
        (lambda: _retry(on=None), "takes an exception class"),
        (lambda: _retry(on=5), "takes an exception class"),
        (lambda: _retry(on=[ValueError("x")]), "takes an exception class"),
        (lambda: _retry(on=int), "takes an exception class"),
        (lambda: _retry(attempts=0), "an int >= 1"),
        (lambda: _retry(attempts=None), "an int >= 1"),
        (lambda: _retry(initial=-0.5), "finite and >= 0"),
        (lambda: _retry(initial=float("inf")), "finite and >= 0"),
        (lambda: _retry(initial=10**400), "finite and >= 0"),  # was an OverflowError
        (lambda: _retry(factor=float("nan")), "finite and >= 1"),
        (lambda: _retry(factor=10**400), "finite and >= 1"),
        (lambda: _retry(max_delay=float("inf")), "finite and >= 0"),
        (lambda: _retry(max_delay=float("nan")), "finite and >= 0"),
        (lambda: _retry(initial="1"), "must be a number"),
        (lambda: _retry(jitter=None), "True or False"),
        (lambda: _tool(timeout=10**400), "finite number > 0"),  # was an OverflowError
        (lambda: _tool(timeout=float("nan")), "finite number > 0"),
        (lambda: _tool(timeout=-1), "finite number > 0"),
        (lambda: _tool(retry=Retry), "must be an actorlog.Retry"),
        (lambda: _tool(effect="delete"), "'read' or 'write'"),
        (lambda: _tool(idempotent="yes"), "True or False"),
        (lambda: _tool(name=5), "non-empty str"),
        (lambda: _tool(reconcile=5), "async callable"),
        (lambda: plain_read.with_options(timeout=10**400), "finite number > 0"),
        (lambda: _with_options(retry=3), "must be an actorlog.Retry"),
    ],
)
def test_every_bad_retry_or_tool_argument_is_a_configuration_error_saying_what_it_takes(
    make: Callable[[], Any], says: str
) -> None:
    """Issue 24 item 7: never a bare ``TypeError``/``OverflowError``; the message says what the
    argument takes."""
    with pytest.raises(ConfigurationError, match=re.escape(says)):
        make()


def test_with_options_keeps_the_tool_and_changes_only_the_options() -> None:
    t = charge.with_options(retry=None, timeout=None)
    assert (t.name, t.effect, t.policy) == (charge.name, charge.effect, charge.policy)
    assert t.retry.attempts == 1 and t.timeout is None
    assert charge.retry.attempts == 4 and charge.timeout == 0.3  # the tool itself is unchanged
    assert issubclass(ToolTimeoutError, TimeoutError)


def test_delays_grow_by_factor_up_to_max_delay() -> None:
    r = Retry(attempts=10, initial=0.5, factor=2.0, max_delay=3, jitter=False)
    assert [r.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    j = Retry(attempts=10, initial=2.0, factor=1.0, jitter=True)
    assert all(1.0 <= j.delay(1) <= 2.0 for _ in range(50))


# -- attempts, live and replayed ---------------------------------------------------------


async def test_each_failed_attempt_is_logged_then_the_call_succeeds(
    make_store: StoreFactory,
) -> None:
    FAIL["flaky_read"] = 2
    live = await _ask(make_store, "a1", Use("flaky_read"))
    assert live == "flaky_read ok on run 3"
    log = await _log(make_store(), "a1")
    assert [(k, tag) for k, tag, _ in log] == [
        ("decision", "attempt_failed"),
        ("decision", "attempt"),
        ("decision", "attempt_failed"),
        ("decision", "attempt"),
        ("result", "flaky_read"),
    ]
    failed = [r for _, tag, r in log if isinstance(r, DecisionRecord) and tag == "attempt_failed"]
    assert [(r.attempt, r.delay, r.in_doubt) for r in failed] == [
        (1, 0.01, False),
        (2, 0.02, False),
    ]
    assert [r.error.message for r in failed if r.error] == [
        "flaky_read failure 1",
        "flaky_read failure 2",
    ]
    result = log[-1][2]
    assert isinstance(result, ResultRecord) and result.ok and result.attempt == 3
    # replay: served from the log, the tool is not run again, the handler sees the same
    runs = len(RUNS["flaky_read"])
    assert await _ask(make_store, "a1", Use("flaky_read"), mid="m2") != live  # a new message
    assert len(RUNS["flaky_read"]) == runs + 1
    async with ActorSystem(make_store(), actors=[Caller]) as system:
        ref = await system.spawn(Caller, "a1")
        state = await ref.ask(Use("state"), message_id="s1")
        assert state.split(" | ")[0] == live
    assert len(RUNS["flaky_read"]) == runs + 1


async def test_the_final_failure_is_the_recorded_error_live_and_on_replay(
    make_store: StoreFactory,
) -> None:
    FAIL["flaky_read"] = 99
    live = await _ask(make_store, "a2", Use("flaky_read"))
    assert live == "error ValueError: flaky_read failure 4"
    log = await _log(make_store(), "a2")
    assert [tag for _, tag, _ in log].count("attempt_failed") == 3
    final = log[-1][2]
    assert isinstance(final, ResultRecord) and not final.ok and final.attempt == 4
    assert len(RUNS["flaky_read"]) == 4
    FAIL["flaky_read"] = 0  # the world changed: replay must not ask it
    async with ActorSystem(make_store(), actors=[Caller]) as system:
        ref = await system.spawn(Caller, "a2")
        assert await ref.ask(Use("flaky_read"), message_id="m1") == live
        assert await ref.ask(Use("state"), message_id="s1") == live
    assert len(RUNS["flaky_read"]) == 4


async def test_an_error_the_policy_does_not_name_fails_at_once(make_store: StoreFactory) -> None:
    FAIL["picky"] = 5
    got = await _ask(make_store, "a3", Use("picky"))
    assert got == "error ValueError: picky failure 1"
    assert [tag for _, tag, _ in await _log(make_store(), "a3")] == ["picky"]


async def test_the_idempotency_key_is_the_same_across_attempts(make_store: StoreFactory) -> None:
    FAIL["charge"] = 2
    assert await _ask(make_store, "a4", Use("charge")) == "charge ok on run 3"
    assert RUNS["charge"] == [Key("a4", 1, 0)] * 3 and len(set(RUNS["charge"])) == 1


async def test_per_call_options_override_the_tool(make_store: StoreFactory) -> None:
    FAIL["plain_read"] = 1
    got = await _ask(make_store, "a5", Use("plain_read", options=(2, None)))
    assert got == "plain_read ok on run 2"
    FAIL["plain_read"] = 99
    got = await _ask(make_store, "a5", Use("plain_read"), mid="m2")  # the tool: no retry
    assert got == "error ValueError: plain_read failure 3"


# -- timeouts ----------------------------------------------------------------------------


async def test_a_read_that_times_out_is_retried(make_store: StoreFactory) -> None:
    HANG["slow_read"] = 1
    assert await _ask(make_store, "t1", Use("slow_read")) == "slow_read ok on run 2"
    failed = [r for _, tag, r in await _log(make_store(), "t1") if tag == "attempt_failed"]
    assert len(failed) == 1 and isinstance(failed[0], DecisionRecord)
    assert failed[0].error is not None and failed[0].error.type == "ToolTimeoutError"
    assert not failed[0].in_doubt


async def test_a_read_timing_out_on_every_attempt_records_the_timeout(
    make_store: StoreFactory,
) -> None:
    HANG["slow_read"] = 9
    got = await _ask(make_store, "t2", Use("slow_read"))
    assert got.startswith("error ToolTimeoutError: tool 'slow_read' did not finish")


async def test_an_idempotent_write_that_timed_out_reruns_with_the_same_key(
    make_store: StoreFactory,
) -> None:
    HANG["charge"] = 1
    assert await _ask(make_store, "t3", Use("charge")) == "charge ok on run 2"
    failed = [r for _, tag, r in await _log(make_store(), "t3") if tag == "attempt_failed"]
    assert isinstance(failed[0], DecisionRecord) and failed[0].in_doubt
    assert RUNS["charge"] == [Key("t3", 1, 0)] * 2 and len(set(RUNS["charge"])) == 1


@pytest.mark.parametrize("decide", ["retry", "result", "fail"])
async def test_a_write_that_timed_out_escalates_before_another_attempt(
    make_store: StoreFactory, decide: str
) -> None:
    HANG["send_mail"] = 1
    async with ActorSystem(make_store(), actors=[Caller]) as system:
        ref = await system.spawn(Caller, "t4")
        # the ask is told its step waits for an operator (InDoubtError) at once
        with anyio.fail_after(10), pytest.raises(InDoubtError):
            await ref.ask(Use("send_mail"), message_id="m1")
        with anyio.fail_after(10):
            (seq,) = await system.wait_in_doubt("t4")
        assert len(RUNS["send_mail"]) == 1  # no second attempt before the operator
        if decide == "retry":
            await system.resolve("t4", seq, retry=True, reason="checked: not sent")
        elif decide == "result":
            await system.resolve("t4", seq, result="sent by hand")
        else:
            await system.resolve("t4", seq, fail="bounced")
        with anyio.fail_after(10):  # asking again with its message_id gets the reply
            answer = [await ref.ask(Use("send_mail"), message_id="m1")]
    expected = {
        "retry": "send_mail ok on run 2",
        "result": "sent by hand",
        "fail": "error OperatorFailed: bounced",
    }[decide]
    assert answer == [expected]
    assert len(RUNS["send_mail"]) == (2 if decide == "retry" else 1)
    tags = [tag for _, tag, _ in await _log(make_store(), "t4")]
    assert tags[0] == "attempt_failed"
    # replay serves all of it
    async with ActorSystem(make_store(), actors=[Caller]) as system:
        ref = await system.spawn(Caller, "t4")
        assert await ref.ask(Use("send_mail"), message_id="m1") == expected
        assert await ref.ask(Use("state"), message_id="s1") == expected
    assert len(RUNS["send_mail"]) == (2 if decide == "retry" else 1)


async def test_a_write_that_timed_out_is_reconciled_before_another_attempt(
    make_store: StoreFactory,
) -> None:
    HANG["book"] = 1
    RECONCILE["answer"] = Happened("booked (reconciled)")
    assert await _ask(make_store, "t5", Use("book")) == "booked (reconciled)"
    assert len(RUNS["book"]) == 1
    log = await _log(make_store(), "t5")
    assert [tag for _, tag, _ in log] == ["attempt_failed", "book"]
    assert isinstance(log[1][2], ResultRecord) and log[1][2].settled_by == "reconcile"


# -- a crash while a retried attempt runs ------------------------------------------------


@tool(effect="read", retry=FAST, name="crashy_read")
async def crashy_read(q: str) -> str:
    return await _behave("crashy_read", q)


@tool(effect="write", retry=Retry(attempts=4, initial=0.0), name="crashy_write")
async def crashy_write(q: str) -> str:
    return await _behave("crashy_write", q)


TOOLS["crashy_read"] = crashy_read
TOOLS["crashy_write"] = crashy_write


async def _crash_during_attempt_2(make_store: StoreFactory, actor_id: str, name: str) -> None:
    """Attempt 1 fails, attempt 2 hangs; the system stops without grace (a crash mid-tool)."""
    FAIL[name], HANG_AT[name] = 1, {2}
    async with ActorSystem(make_store(), actors=[Caller], shutdown_grace=0) as system:
        ref = await system.spawn(Caller, actor_id)
        await ref.send(Use(name), message_id="m1")
        with anyio.fail_after(10):
            while len(RUNS.get(name, [])) < 2:
                await anyio.sleep(0.01)
    HANG_AT[name] = set()


async def test_a_read_interrupted_in_a_retried_attempt_runs_again_as_the_next(
    make_store: StoreFactory,
) -> None:
    await _crash_during_attempt_2(make_store, "c1", "crashy_read")
    assert await _ask(make_store, "c1", Use("crashy_read")) == "crashy_read ok on run 3"
    log = await _log(make_store(), "c1")
    assert [tag for _, tag, _ in log] == [
        "attempt_failed",
        "attempt",  # attempt 2: interrupted, in doubt, a read: run again
        "attempt",
        "crashy_read",
    ]
    result = log[-1][2]
    assert isinstance(result, ResultRecord) and result.attempt == 3


async def test_a_write_interrupted_in_a_retried_attempt_waits_for_an_operator(
    make_store: StoreFactory,
) -> None:
    await _crash_during_attempt_2(make_store, "c2", "crashy_write")
    async with ActorSystem(make_store(), actors=[Caller]) as system:
        ref = await system.spawn(Caller, "c2")
        with anyio.fail_after(10):
            (seq,) = await system.wait_in_doubt("c2")
        assert len(RUNS["crashy_write"]) == 2  # not re-run blindly
        await system.resolve("c2", seq, result="done by hand")
        with anyio.fail_after(10):
            assert await ref.ask(Use("crashy_write"), message_id="m1") == "done by hand"
    assert len(RUNS["crashy_write"]) == 2


def test_attempt_failed_payload_keys_are_in_format_order() -> None:
    """FORMAT.md [F5]/[F17]: the key order is part of the checksummed bytes."""
    from actorlog._journal.records import ErrorInfo, attempt_failed_payload

    p = attempt_failed_payload(
        attempt=2, error=ErrorInfo("ValueError", "x"), delay=1.5, in_doubt=False, reason="r"
    )
    assert list(p) == [
        "action",
        "attempt",
        "error",
        "delay",
        "in_doubt",
        "by",
        "reason",
        "at",
    ]
    assert (p["action"], p["attempt"], p["delay"], p["by"]) == ("attempt_failed", 2, 1.5, "runtime")
