"""A stateful model test of the runtime's promises (issue 11 "make the suite find this class
of defect by itself", issue 18 "passivation and spawn options").

Hypothesis drives rules synchronously; the :class:`ActorSystem` lives in a background event
loop (``anyio.from_thread.start_blocking_portal``) and every rule is one ``portal.call``. The
model is small on purpose: which messages were acknowledged (and their first reply), which are
uncertain (their caller was cancelled), which actors are blocked in a tool or wait for an
operator. The checks after every rule are the invariants of DESIGN.md section 10, read through
the public API and the operator API (``actorlog.ops``); the one exception, marked, is the
check that no reply slot or waiter is left behind, for which there is no public API.

Rules and checks that find a defect on current ``main`` are switched off in
:data:`BROKEN_ON_MAIN` (name -> the issue item it waits for). Enabling one is deleting its
line; ``ACTORLOG_MODEL_ENABLE=all`` (or a comma-separated list of names) enables them for one
run without editing anything.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import copy
import dataclasses
import os
import shutil
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
from actorlog import (
    ActorlogError,
    ActorSystem,
    EncodeError,
    HandlerError,
    InDoubtError,
    RecoveryReport,
    StoreClosedError,
    ops,
)
from actorlog.store import Store
from actorlog.stores import MemoryStore, SqliteStore
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from .agent import OVERSIZE, WORLD, Agent, Op, Peek, make_agent

T = TypeVar("T")

#: Rules (and rule variants, and checks) that find a defect on current main, with the item of
#: issue 11 or 18 each waits for (issue 15 for InDoubtError; NEW: found by this test, with a
#: regression test of its own). Delete a line when its fix is merged: the rule is then on.
BROKEN_ON_MAIN: dict[str, str] = {}

#: Every switch, on unless listed in BROKEN_ON_MAIN (or ACTORLOG_MODEL_DISABLE).
SWITCHES = (
    # rules and variants
    "spawn",
    "send",
    "ask",
    "reask_answered",
    "handler_error",
    "tool_error",
    "unloggable_tool_error",
    "foreign_cancel",
    "live_replay_values",
    "reply_alias",
    "actor_to_actor",
    "concurrent",
    "duplicate_id_race",
    "cancel_ask",
    "cancel_reask",
    "hang_then_restart",
    "resolve",
    "double_resolve",
    "resolve_wrong_seq",
    "in_doubt_error",
    "bad_message",
    "bad_message_id",
    "restart",
    "passivation",
    "spawn_options",
    "fork",
    # issue 25: concurrent effects inside a step (and concurrent_machine.py)
    "conc_steps",
    "conc_hang",
    "conc_losers_settled",
    # issue 24: retries, lifecycle, compaction, changed classes
    "retry",
    "retry_crash",
    "retry_double_kill",
    "lifecycle_stop",
    "lifecycle_stop_queued",
    "lifecycle_terminate",
    "lifecycle_terminate_queued",
    "lifecycle_cancel",
    "lifecycle_delete",
    "compaction",
    "upgrade",
    "upgrade_live",
    # checks
    "check_log",
    "check_settled",
    "check_state",
    "check_replay",
    "check_no_waiters",
    "check_verify",
    "verify_live",
)

#: what a fresh message asks the actor to do (see agent.Agent.receive)
MESSAGE_KINDS = (
    *("plain", "read", "write", "boom", "raise:plain", "value", "send", "alias"),
    *("raise:surrogate", "raise:oversize", "raise:cancel", "raise:genexit"),
    *("conc", "conc"),
)

#: a concurrent step's shape (``agent._concurrent``) and tool latencies (ms) by ``detail``:
#: the shapes whose reply is fixed by their call ids (races and deadlines are the
#: concurrency model's, concurrent_machine.py)
CONC_BY_DETAIL = {
    "int_keys": "fanout:5,0,10,1,0,3",
    "tuple": "nested:3,0,1,5",
    "nested": "native:4,0,2,1,0",
    "plain": "fanout:0,0",
}

HANG_KINDS = ("hang_read", "hang_idem", "hang_escalate", "hang_escalate")

TIMEOUT = 5.0  # seconds for any one rule's awaits: longer means a hang (a defect)


def _enabled() -> frozenset[str]:
    on = set(SWITCHES) - set(BROKEN_ON_MAIN)
    extra = os.environ.get("ACTORLOG_MODEL_ENABLE", "")
    if extra == "all":
        on = set(SWITCHES)
    elif extra:
        on |= {s.strip() for s in extra.split(",") if s.strip()}
    off = os.environ.get("ACTORLOG_MODEL_DISABLE", "")
    on -= {s.strip() for s in off.split(",") if s.strip()}
    unknown = on - set(SWITCHES)
    assert not unknown, f"unknown model switches: {sorted(unknown)}"
    return frozenset(on)


ENABLED = _enabled()

#: how many times each kind of operation ran (this process): printed by the tests
STATS: Counter[str] = Counter()


def on(name: str) -> bool:
    return name in ENABLED


class Hang(AssertionError):
    """A rule's awaits did not finish within TIMEOUT: the runtime hangs."""


@contextlib.contextmanager
def crashes_fail() -> Iterator[None]:
    """A BaseException out of the runtime (a CancelledError, a GeneratorExit, an exception
    group from the system's task group) becomes an assertion: Hypothesis shrinks only
    Exceptions."""
    try:
        yield
    except (KeyboardInterrupt, SystemExit):
        raise
    except concurrent.futures.CancelledError as exc:
        raise AssertionError("the system crashed (the portal cancelled the call)") from exc
    except Exception:
        raise
    except BaseException as exc:
        raise AssertionError("the system crashed") from exc


class ActorModel:
    """What the model knows about one actor."""

    def __init__(self, actor_id: str, snapshot_every: int | None) -> None:
        self.actor_id = actor_id
        self.snapshot_every = snapshot_every
        #: acknowledged message id -> the Op (its tag is the message id)
        self.acked: dict[str, Op] = {}
        #: message ids whose first reply we saw: the reply, or the HandlerError's message
        self.replies: dict[str, tuple[bool, Any]] = {}
        #: message ids whose caller was cancelled: logged or not, we do not know
        self.uncertain: dict[str, Op] = {}
        #: tags that must appear in the state exactly once (once handled)
        self.expected_tags: set[str] = set()
        #: messages other actors' steps send here (ctx.send): tag -> the sender's id
        self.forwards: dict[str, str] = {}
        #: a step blocked in a hanging tool: its tag and kind (hang_read, ...)
        self.blocked: tuple[str, str] | None = None
        #: the blocked step waits for an operator (escalated after a restart)
        self.in_doubt = False
        #: tags due here more than once: a fork re-sent them (its own message ids), n extra
        self.extra: Counter[str] = Counter()
        #: a fork: spawned without options, as an operator would (it has its source's)
        self.plain_spawn = False
        #: a fork's first recovery (which may replay many copied steps)
        self.first_recovery: RecoveryReport | None = None
        #: the actor ended: "finished" (ctx.stop) or "terminated"; it takes no messages
        self.ended: str | None = None
        #: acknowledged message ids that compaction removed from the log
        self.compacted: set[str] = set()
        #: its log was compacted (it no longer starts at seq 1)
        self.was_compacted = False
        #: it made retried tool calls
        self.has_retries = False
        #: it handled concurrent steps (the fork plan does not model their calls one by one)
        self.has_conc = False
        #: tags of steps an operator cancelled (system.cancel): in the state at most once
        #: (the cancel may land after the tool returned), never asked again
        self.cancelled: set[str] = set()

    @property
    def busy(self) -> bool:
        return self.blocked is not None


@dataclasses.dataclass
class ForkPlan:
    """What a fork must be (see ModelMachine._fork_plan)."""

    model: ActorModel
    #: message ids logged by the fork point, in order (Peeks too)
    ids: list[str | None] = dataclasses.field(default_factory=list)
    #: tags of the messages logged by the fork point
    tags: set[str] = dataclasses.field(default_factory=set)
    #: how many messages of each tag the fork point logged: a tag is logged more than once
    #: when a fork sent it again (its own message id), maybe after the fork point
    counts: Counter[str] = dataclasses.field(default_factory=Counter)
    #: tags whose tool call's outcome was logged by the fork point: never run again
    settled: set[str] = dataclasses.field(default_factory=set)
    #: escalated intents left without an outcome by the fork point: intent seq -> tag
    in_doubt: dict[int, str] = dataclasses.field(default_factory=dict)
    #: tag -> the value the fork's step gets from the retried call
    retried: dict[str, str] = dataclasses.field(default_factory=dict)
    #: (receiver, tag) the fork sends again, with its own message id (the send was not
    #: logged by the fork point)
    resend: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    #: the fork's state after recovery
    state: str = ""


class ModelMachine(RuleBasedStateMachine):
    """Set :attr:`store_kind` (``memory`` or ``sqlite``) and :attr:`backend` (the anyio
    backend the system runs on: ``asyncio`` or ``trio``) in a subclass."""

    store_kind = "memory"
    backend = "asyncio"
    base_dir: str | None = None  # where SQLite files go (the test's tmp_path)
    #: the rules of issue 24 (retries, lifecycle, compaction, class upgrades) are on: they
    #: restart often, so they run in tests of their own with fewer examples
    extended = False

    def __init__(self) -> None:
        super().__init__()
        WORLD.reset()
        self.tmp = tempfile.mkdtemp(prefix="actorlog-model-", dir=self.base_dir)
        self.path = os.path.join(self.tmp, "agents.db")
        self.memory = MemoryStore()
        self._portal_cm = anyio.from_thread.start_blocking_portal(self.backend)
        self.portal = self._portal_cm.__enter__()
        self._system_cm: AbstractContextManager[ActorSystem] | None = None
        self.system: ActorSystem | None = None
        self.reader: Store | None = None
        self.actors: dict[str, ActorModel] = {}
        self.passivate_after: float | None = None
        self.counter = 0
        self.restarts = 0
        self.spawned = 0  # actors spawned by the spawn rule (forks not counted)
        self.forks = 0
        #: the actor class the system runs (a new version replaces it: see ``upgrade``)
        self.version = 1
        self.cls = Agent

    # -- plumbing --------------------------------------------------------------------------

    def run(self, fn: Callable[[], Awaitable[T]], what: str) -> T:
        STATS[what.split(" ")[0]] += 1

        async def bounded() -> T:
            try:
                with anyio.fail_after(TIMEOUT):
                    return await fn()
            except TimeoutError as exc:
                raise Hang(f"{what}: no answer in {TIMEOUT} s (a hang)") from exc

        try:
            with crashes_fail():
                return self.portal.call(bounded)
        except Exception as exc:
            if self._crashed():
                # one assertion, whatever the call that met the dead system saw: Hypothesis
                # then shrinks to the rule that killed it instead of calling it flaky
                raise AssertionError("the system stopped by itself (it crashed)") from exc
            raise

    def _crashed(self) -> bool:
        """INTERNAL (no public API): the system we did not close is closed."""
        system = self.system
        return system is not None and (system._tg is None or system._closed)

    def fresh(self, prefix: str = "m") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def make_store(self) -> Store:
        if self.store_kind == "memory":
            return self.memory
        return SqliteStore(self.path)

    def start(self) -> None:
        system = ActorSystem(
            self.make_store(),
            actors=[self.cls],
            shutdown_grace=0,
            passivate_after=self.passivate_after,
        )
        self._system_cm = self.portal.wrap_async_context_manager(system)
        with crashes_fail():
            self.system = self._system_cm.__enter__()

    def stop(self) -> None:
        cm, self._system_cm, self.system = self._system_cm, None, None
        if cm is not None:
            with crashes_fail():
                cm.__exit__(None, None, None)

    def teardown(self) -> None:
        try:
            with crashes_fail():
                try:
                    self.stop()
                    if self.reader is not None and self.reader is not self.memory:
                        self.portal.call(self.reader.close)
                except RuntimeError as exc:
                    if "portal is not running" not in str(exc):
                        raise
                    raise AssertionError("the system crashed its event loop") from exc
        finally:
            try:
                with crashes_fail():
                    self._portal_cm.__exit__(None, None, None)
            finally:
                shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def sys(self) -> ActorSystem:
        assert self.system is not None
        return self.system

    def live(self) -> list[ActorModel]:
        """The actors that take messages (not ended), in id order."""
        return [a for _, a in sorted(self.actors.items()) if a.ended is None]

    def pick(self, i: int) -> ActorModel:
        ids = self.live()
        return ids[i % len(ids)]

    def pick_free(self, i: int) -> ActorModel | None:
        free = [a for a in self.live() if not a.busy]
        return free[i % len(free)] if free else None

    def has_actors(self) -> bool:
        return bool(self.live())

    def ask(self, a: ActorModel, op: Op | Peek, message_id: str) -> tuple[bool, Any]:
        """Ask and return (ok, reply) or (False, the HandlerError's message)."""

        async def go() -> tuple[bool, Any]:
            ref = self.sys.ref(self.cls, a.actor_id)
            try:
                return True, await ref.ask(op, message_id=message_id)
            except HandlerError as exc:
                return False, exc.message

        return self.run(go, f"ask {a.actor_id} {message_id} {op}")

    def acknowledge(self, a: ActorModel, op: Op, answer: tuple[bool, Any] | None) -> None:
        a.acked[op.tag] = op
        a.uncertain.pop(op.tag, None)
        if op.kind != "boom" and op.tag not in a.cancelled:
            a.expected_tags.add(op.tag)
        if answer is None:
            return
        first = a.replies.setdefault(op.tag, answer)
        assert answer == first, f"{op.tag}: a repeated ask got {answer!r}, first {first!r}"

    # -- setup -----------------------------------------------------------------------------

    @initialize(passivate=st.booleans())
    def setup(self, passivate: bool) -> None:
        if passivate and on("passivation"):
            self.passivate_after = 0.05
        self.start()
        if self.store_kind == "sqlite":
            self.reader = SqliteStore(self.path, read_only=True)
            self.portal.call(self.reader.open)
        else:
            self.reader = self.memory

    # -- rules -----------------------------------------------------------------------------

    @precondition(lambda self: self.spawned < 3)
    @rule(every=st.sampled_from([None, None, 1]))
    def spawn(self, every: int | None) -> None:
        if not on("spawn_options"):
            every = None
        actor_id = f"a{self.spawned}"
        self.spawned += 1
        model = ActorModel(actor_id, every)

        async def go() -> None:
            if every is None:
                await self.sys.spawn(self.cls, actor_id)
            else:
                await self.sys.spawn(self.cls, actor_id, snapshot_every=every, snapshot_keep=5)

        self.run(go, f"spawn {actor_id}")
        self.actors[actor_id] = model

    @precondition(lambda self: self.has_actors())
    @rule(
        i=st.integers(0, 5),
        kind=st.sampled_from(MESSAGE_KINDS),
        detail=st.sampled_from(["int_keys", "tuple", "nested", "plain"]),
        escalate=st.booleans(),
        use_ask=st.booleans(),
        to=st.integers(0, 5),
    )
    def message(
        self, i: int, kind: str, detail: str, escalate: bool, use_ask: bool, to: int
    ) -> None:
        """A fresh message (send or ask) of one kind of step."""
        a = self.pick_free(i) if use_ask else self.pick(i)
        if a is None:
            return
        op = self._op(kind, detail, escalate, to)
        if op is None:
            return
        if op.kind == "conc":
            a.has_conc = True
            STATS["conc_step"] += 1
        if use_ask and on("ask"):
            self.acknowledge(a, op, self.ask(a, op, op.tag))
            if op.kind == "alias" and on("reply_alias"):
                self._mutate_reply(a, op)
        elif on("send"):
            self.run(lambda: self.sys.ref(self.cls, a.actor_id).send(op, message_id=op.tag), "send")
            self.acknowledge(a, op, None)
        if op.kind == "send":
            self.actors[op.arg].forwards[f"{op.tag}>"] = a.actor_id

    def _op(self, kind: str, detail: str, escalate: bool, target: int) -> Op | None:
        tag = self.fresh()
        if kind.startswith("raise:"):
            how = kind.split(":")[1]
            if how != "plain" and not on(
                "foreign_cancel" if how in ("cancel", "genexit") else "unloggable_tool_error"
            ):
                return None
            if not on("tool_error"):
                return None
            return Op(tag, "raise_escalate" if escalate else "raise_read", how)
        if kind == "boom" and not on("handler_error"):
            return None
        if kind == "value":
            if detail != "plain" and not on("live_replay_values"):
                return None
            return Op(tag, "value", detail)
        if kind == "send":
            if not on("actor_to_actor"):
                return None
            return Op(tag, "send", self.pick(target).actor_id)
        if kind == "alias" and not on("reply_alias"):
            return None
        if kind == "conc":
            if not on("conc_steps"):
                return None
            return Op(tag, kind, CONC_BY_DETAIL[detail])
        return Op(tag, kind)

    def _mutate_reply(self, a: ActorModel, op: Op) -> None:
        """The caller changes what ask gave it: the actor's state must not change."""
        ok, reply = a.replies[op.tag]
        assert ok and isinstance(reply, list)
        reply.append("MUTATED-BY-CALLER")
        _, state = self.ask(a, Peek(), self.fresh("p"))
        assert "MUTATED-BY-CALLER" not in state, f"ask's reply aliases {a.actor_id}'s state"
        reply.pop()

    @precondition(lambda self: self.has_actors())
    @rule(i=st.integers(0, 5), which=st.integers(0, 50), as_send=st.booleans())
    def repeat(self, i: int, which: int, as_send: bool) -> None:
        """Send or ask again an acknowledged message id: nothing new is logged, an ask gets
        the recorded reply."""
        if not on("reask_answered"):
            return
        a = self.pick(i)
        if not a.acked or (a.busy and not as_send):
            return
        kept = sorted(set(a.acked) - a.compacted - a.cancelled)
        if not kept:
            return  # a retry of a compacted id is a new message (docs/recovery.md)
        tag = kept[which % len(kept)]
        op = a.acked[tag]
        if as_send:
            self.run(lambda: self.sys.ref(self.cls, a.actor_id).send(op, message_id=tag), "resend")
        else:
            self.acknowledge(a, op, self.ask(a, op, tag))

    @precondition(lambda self: self.has_actors())
    @rule(
        i=st.integers(0, 5),
        callers=st.lists(st.booleans(), min_size=2, max_size=4),
        kind=st.sampled_from(["plain", "read", "write"]),
        others=st.booleans(),
    )
    def concurrent(self, i: int, callers: list[bool], kind: str, others: bool) -> None:
        """Several callers send (False) or ask (True) one fresh message id at once; with
        ``others``, every other free actor is asked at the same time (passivation races).
        Logged once; every ask gets the same reply."""
        if not on("concurrent"):
            return
        a = self.pick_free(i)
        if a is None:
            return
        if not on("duplicate_id_race"):
            callers = callers[:1]
        op = Op(self.fresh(), kind)
        extra = [(b, Op(self.fresh(), "plain")) for b in self.live()]
        extra = [(b, o) for b, o in extra if others and b is not a and not b.busy]

        async def go() -> tuple[list[Any], dict[str, Any]]:
            replies: list[Any] = []
            side: dict[str, Any] = {}

            async def one(want: bool) -> None:
                ref = self.sys.ref(self.cls, a.actor_id)
                if want:
                    replies.append(await ref.ask(op, message_id=op.tag))
                else:
                    await ref.send(op, message_id=op.tag)

            async def other(b: ActorModel, o: Op) -> None:
                side[o.tag] = await self.sys.ref(self.cls, b.actor_id).ask(o, message_id=o.tag)

            async with anyio.create_task_group() as tg:
                for want in callers:
                    tg.start_soon(one, want)
                for b, o in extra:
                    tg.start_soon(other, b, o)
            return replies, side

        replies, side = self.run(go, f"concurrent {op.tag}")
        self.acknowledge(a, op, None)
        for reply in replies:
            self.acknowledge(a, op, (True, reply))
        for b, o in extra:
            self.acknowledge(b, o, (True, side[o.tag]))

    @precondition(lambda self: self.has_actors())
    @rule(
        i=st.integers(0, 5),
        k=st.integers(0, 12),
        reask=st.booleans(),
        which=st.integers(0, 50),
        kind=st.sampled_from(["plain", "read", "write"]),
    )
    def cancelled_ask(self, i: int, k: int, reask: bool, which: int, kind: str) -> None:
        """An ask whose caller is cancelled after ``k`` checkpoints of a sibling task, then
        asked again at once. Re-asking an answered id sweeps the cancel over ``0..k``
        checkpoints (where it lands depends on thread timing with SQLite)."""
        if not on("cancel_ask"):
            return
        a = self.pick_free(i)
        if a is None:
            return
        answered = [t for t in sorted(a.replies) if a.replies[t][0]]
        answered = [t for t in answered if t not in a.compacted | a.cancelled]
        if reask and answered and on("cancel_reask"):
            op = a.acked[answered[which % len(answered)]]
            sweep = range(k + 1)
        else:
            op = Op(self.fresh(), kind)
            sweep = range(k, k + 1)
        for after in sweep:
            answer = self.run(partial(self._cancelled_ask, a, op, after), f"cancelled ask {op.tag}")
            if answer is not None:
                self.acknowledge(a, op, answer)
            elif op.tag not in a.acked:
                a.uncertain[op.tag] = op
            # a cancelled caller leaves nothing behind: the same id can be asked again at once
            if not on("duplicate_id_race"):
                # on main, a retry racing the end of the cancelled ask's step logs the id
                # twice (see BROKEN_ON_MAIN): let that step become durable first
                self.ask(a, Peek(), self.fresh("p"))
            self._retry_uncertain(a)

    async def _cancelled_ask(self, a: ActorModel, op: Op, after: int) -> tuple[bool, Any] | None:
        result: list[tuple[bool, Any]] = []
        async with anyio.create_task_group() as tg:

            async def canceller() -> None:
                for _ in range(after):
                    await anyio.lowlevel.checkpoint()
                tg.cancel_scope.cancel()

            async def asker() -> None:
                try:
                    reply = await self.sys.ref(self.cls, a.actor_id).ask(op, message_id=op.tag)
                    result.append((True, reply))
                except HandlerError as exc:
                    result.append((False, exc.message))
                tg.cancel_scope.cancel()

            tg.start_soon(asker)
            tg.start_soon(canceller)
        return result[0] if result else None

    def _retry_uncertain(self, a: ActorModel) -> None:
        for tag, op in sorted(a.uncertain.items()):
            self.acknowledge(a, op, self.ask(a, op, tag))
        for tag in sorted(a.replies):
            if tag in a.acked and a.replies[tag][0] and tag not in a.compacted:
                self.acknowledge(a, a.acked[tag], self.ask(a, a.acked[tag], tag))
                break

    @precondition(lambda self: self.has_actors())
    @rule(i=st.integers(0, 5), kind=st.sampled_from(HANG_KINDS))
    def crash_in_tool(self, i: int, kind: str) -> None:
        """A step blocks in a tool and the system restarts at once (the way to an in-doubt
        escalated write that ``resolve`` needs, in two rules instead of three)."""
        if not on("hang_then_restart"):
            return
        self.hang(i, kind)
        self.restart()

    @precondition(lambda self: self.has_actors())
    @rule(i=st.integers(0, 5), kind=st.sampled_from(HANG_KINDS), among=st.booleans())
    def hang(self, i: int, kind: str, among: bool = False) -> None:
        """A step blocks in a tool; the next restart finds its intent logged, not settled.
        ``among``: the tool is called from a task of a group whose other tasks' calls
        finish (issue 25: the crash leaves one task's call open, the others' settled)."""
        if not on("hang_then_restart"):
            return
        a = self.pick_free(i)
        if a is None:
            return
        op = Op(self.fresh(), kind, "conc" if among and on("conc_hang") else "")
        if op.arg:
            a.has_conc = True
            STATS["conc_hang"] += 1
        WORLD.armed.add(op.tag)
        event = WORLD.hanging.setdefault(op.tag, anyio.Event())

        async def go() -> None:
            await self.sys.ref(self.cls, a.actor_id).send(op, message_id=op.tag)
            await event.wait()

        self.run(go, f"hang_{kind} {op.tag}")
        self.acknowledge(a, op, None)
        a.blocked = (op.tag, kind)

    @precondition(lambda self: any(a.in_doubt for a in self.actors.values()))
    @rule(
        i=st.integers(0, 5),
        how=st.sampled_from(["result", "retry", "fail"]),
        again=st.sampled_from([None, "result", "retry", "fail"]),
        later=st.booleans(),
        bad_first=st.booleans(),
    )
    def resolve(self, i: int, how: str, again: str | None, later: bool, bad_first: bool) -> None:
        """An operator settles the in-doubt escalated write (and maybe tries a second time:
        refused, nothing logged)."""
        if not on("resolve"):
            return
        waiting = [a for _, a in sorted(self.actors.items()) if a.in_doubt]
        a = waiting[i % len(waiting)]
        assert a.blocked is not None
        tag, _ = a.blocked
        if not on("double_resolve"):
            again = None

        def decide(action: str) -> dict[str, Any]:
            if action == "result":
                return {"result": f"by hand:{tag}"}
            if action == "retry":
                return {"retry": True}
            return {"fail": f"not sent:{tag}"}

        async def go() -> tuple[int, BaseException | None]:
            pending = await self.sys.wait_in_doubt(a.actor_id)
            assert len(pending) == 1, pending
            (seq,) = pending
            if on("in_doubt_error"):
                # waiting is visible: the caller of a step that waits for an operator
                ref = self.sys.ref(self.cls, a.actor_id)
                try:
                    await ref.ask(a.acked[tag], message_id=tag, timeout=1.0)
                except InDoubtError:
                    pass
                except TimeoutError:
                    raise AssertionError(f"ask of {tag} (in doubt) waits silently") from None
                else:
                    raise AssertionError(f"ask of {tag} (in doubt) answered")
            if bad_first:
                # an operator's result that cannot be logged: refused, nothing written
                before = (await ops.actor_status(self._reader(), a.actor_id)).last_seq
                try:
                    await self.sys.resolve(a.actor_id, seq, result="bad \udcff", reason="bad")
                except EncodeError:
                    pass
                else:
                    raise AssertionError("an unloggable resolved result was accepted")
                after = (await ops.actor_status(self._reader(), a.actor_id)).last_seq
                assert before == after, f"a refused resolve wrote seqs {before + 1}..{after}"
            await self.sys.resolve(a.actor_id, seq, **decide(how), reason="model")
            refused: BaseException | None = None
            if again is not None and not later:
                try:
                    await self.sys.resolve(a.actor_id, seq, **decide(again), reason="again")
                except ActorlogError as exc:
                    refused = exc
            return seq, refused

        seq, refused = self.run(go, f"resolve {a.actor_id}")
        assert again is None or later or refused is not None, (
            f"a second decision ({again}) on intent {seq} was accepted"
        )
        a.blocked, a.in_doubt = None, False
        expected = {
            "result": f"by hand:{tag}",
            "retry": f"h:{tag}",
            "fail": f"failed:not sent:{tag}",
        }
        self.acknowledge(a, a.acked[tag], self.ask(a, a.acked[tag], tag))
        assert a.replies[tag] == (True, expected[how]), (a.replies[tag], how)
        if again is not None and later:

            async def twice() -> None:
                await self.sys.resolve(a.actor_id, seq, **decide(again), reason="again")

            try:
                self.run(twice, "second resolve")
            except ActorlogError:
                pass
            else:
                raise AssertionError(f"a second decision on intent {seq} was accepted")
        self._check_one_decision(a, seq)

    def _check_one_decision(self, a: ActorModel, seq: int) -> None:
        async def go() -> list[str]:
            assert self.reader is not None
            h = await ops.history(self.reader, a.actor_id)
            for step in h.steps:
                for call in step.calls:
                    if call.intent_seq == seq:
                        return [d.action for d in call.decisions if d.action != "attempt"]
            raise AssertionError(f"intent {seq} not in {a.actor_id}'s history")

        decisions = self.run(go, "history")
        assert len(decisions) == 1, f"intent {seq} of {a.actor_id} has decisions {decisions}"

    @precondition(lambda self: self.has_actors())
    @rule(i=st.integers(0, 5), seq=st.integers(-1, 60))
    def resolve_wrong_seq(self, i: int, seq: int) -> None:
        """Resolving a seq that is not an in-doubt intent is refused and writes nothing."""
        if not on("resolve_wrong_seq"):
            return
        a = self.pick(i)

        async def go() -> tuple[int, int]:
            assert self.reader is not None
            pending = self.sys.in_doubt(a.actor_id)
            if seq in pending:
                return 0, 0
            before = (await ops.actor_status(self.reader, a.actor_id)).last_seq
            try:
                await self.sys.resolve(a.actor_id, seq, fail="wrong")
            except ActorlogError:
                pass
            else:
                raise AssertionError(f"resolve of {a.actor_id} seq {seq} was accepted")
            return before, (await ops.actor_status(self.reader, a.actor_id)).last_seq

        before, after = self.run(go, "wrong resolve")
        assert before == after, f"a refused resolve wrote seqs {before + 1}..{after}"

    @precondition(lambda self: self.has_actors())
    @rule(i=st.integers(0, 5), what=st.sampled_from(["surrogate", "oversize", "bad_id"]))
    def bad_message(self, i: int, what: str) -> None:
        """Unloggable input fails at the call with a typed error and writes nothing."""
        if not on("bad_message") or (what == "bad_id" and not on("bad_message_id")):
            return
        a = self.pick(i)
        mid = self.fresh()
        if what == "surrogate":
            op = Op(mid, "plain", "bad \udcff")
        elif what == "oversize":
            op = Op(mid, "plain", "x" * OVERSIZE)
        else:
            op, mid = Op(mid, "plain"), mid + "\udcff"

        async def go() -> tuple[int, int, BaseException | None]:
            assert self.reader is not None
            before = (await ops.actor_status(self.reader, a.actor_id)).last_seq
            error: BaseException | None = None
            try:
                await self.sys.ref(self.cls, a.actor_id).send(op, message_id=mid)
            except ActorlogError as exc:
                error = exc
            return before, (await ops.actor_status(self.reader, a.actor_id)).last_seq, error

        before, after, error = self.run(go, f"bad message {what}")
        assert error is not None, f"a {what} message was accepted"
        assert not isinstance(error, StoreClosedError), f"{what}: misleading {error!r}"
        if what != "bad_id":
            assert isinstance(error, EncodeError), f"{what}: {error!r}"
        assert before == after, f"a refused {what} message wrote seqs {before + 1}..{after}"

    @precondition(lambda self: self.has_actors())
    @rule()
    def restart(self) -> None:
        """Close the system (cancelling blocked tools: their intents stay in doubt) and open
        a new one on the same store; spawn every actor again, as an application would."""
        if not on("restart"):
            return
        self._restart()

    def _restart(self, offline: Callable[[], None] | None = None) -> None:
        """Stop the system, run ``offline`` (an operator's tool on the stopped store), start
        it again and spawn every actor, settling what the restart left blocked."""
        self.stop()
        if offline is not None:
            offline()
        self.restarts += 1
        self.start()
        for a in self.actors.values():
            if a.ended is not None:
                self._check_ended_spawn(a)
                continue

            async def go(a: ActorModel = a) -> None:
                if a.snapshot_every is None or a.plain_spawn:
                    await self.sys.spawn(self.cls, a.actor_id)
                else:
                    await self.sys.spawn(
                        self.cls, a.actor_id, snapshot_every=a.snapshot_every, snapshot_keep=5
                    )

            self.run(go, f"respawn {a.actor_id}")
            if a.blocked is None:
                continue
            tag, kind = a.blocked
            if kind == "hang_escalate":
                a.in_doubt = True
                found = self.run(partial(self.sys.wait_in_doubt, a.actor_id), "in doubt")
                assert len(found) == 1, found
            else:
                a.blocked = None  # re-run by its policy: the step completes by itself
                self.acknowledge(a, a.acked[tag], self.ask(a, a.acked[tag], tag))
                assert a.replies[tag] == (True, f"h:{tag}"), a.replies[tag]

    @precondition(lambda self: self.has_actors() and self.forks < 2)
    @rule(
        i=st.integers(0, 5),
        where=st.integers(0, 10**6),
        point=st.sampled_from(["any", "inside", "send", "call"]),
        to=st.integers(0, 5),
        offline=st.booleans(),
    )
    def fork(self, i: int, where: int, point: str, to: int, offline: bool) -> None:
        """An operator forks an idle actor at any seq of its log (a step boundary, mid-step,
        after a ``ctx.send``) with ``ops.fork(..., yes=True)``, and the fork is spawned.
        On SQLite the system is stopped first (a writable open is refused while a runtime
        holds the file), as an operator would; on ``MemoryStore`` the fork is made offline or
        next to the live system. From then on the fork is an actor like the others."""
        if not on("fork"):
            return
        a = self.pick_free(i)
        if a is None or a.was_compacted or a.has_retries or a.cancelled or a.has_conc:
            # a fork needs the log from seq 1 (the plan reads the whole history); the plan
            # does not model retried calls (a fork cut between attempts runs the rest)
            return  # a fork needs the log from seq 1 (the plan reads the whole history)
        if self.store_kind == "sqlite":
            offline = True
        sender = None
        if point == "send" and on("actor_to_actor"):
            # a step that ctx.spawns and ctx.sends, forked at one of its seqs
            sender = Op(self.fresh(), "send", self.pick(to).actor_id)
            self.acknowledge(a, sender, self.ask(a, sender, sender.tag))
            self.actors[sender.arg].forwards[f"{sender.tag}>"] = a.actor_id
        state = self._quiesce()[a.actor_id]
        before = self.run(lambda: ops.history(self._reader(), a.actor_id), "history")
        last = before.actor.last_seq
        # ``inside``: a seq inside a step (after an intent, a result, a decision, a send),
        # which a uniform pick rarely hits: most of a log is the invariants' Peeks;
        # ``send``: any seq of the send step, from its message to its end; ``call``: between
        # a tool call's intent and its result (in doubt when the call escalates)
        points: list[int] = []
        for step in before.steps:
            end = step.step_seq or last + 1
            if point == "call":
                for c in step.calls:
                    points += range(c.intent_seq, c.result_seq or end)
            elif sender is None:
                points += range(step.message_seq + 1, end)
            elif step.message_id == sender.tag:
                points += range(step.message_seq, end + 1)
        at = points[where % len(points)] if point != "any" and points else 1 + where % last
        self.forks += 1
        new_id = f"{a.actor_id}f{self.forks}"
        plan = self._fork_plan(a, before, at, new_id, state)
        runs, keys = len(WORLD.runs), len(WORLD.keys)

        async def fork(store: Store) -> None:
            result = await ops.fork(store, a.actor_id, at=at, new_id=new_id, yes=True)
            assert result.entries_copied == at, result
            after = await ops.history(store, a.actor_id)
            assert after.actor.last_seq == last, f"the fork appended to {a.actor_id}"
            assert after.steps == before.steps, f"the fork changed {a.actor_id}'s history"

        if offline:

            def offline_fork() -> None:
                async def go() -> None:
                    store = self.make_store()
                    await store.open()
                    try:
                        await fork(store)
                    finally:
                        if store is not self.memory:
                            await store.close()

                self.run(go, f"fork {a.actor_id} at {at} (offline)")

            self._restart(offline_fork)
        else:
            self.run(partial(fork, self.memory), f"fork {a.actor_id} at {at} (live)")

        async def run_fork() -> tuple[dict[int, tuple[str, str]], str]:
            await self.sys.spawn(self.cls, new_id)
            pending: dict[int, tuple[str, str]] = {}
            if plan.in_doubt:
                pending = await self.sys.wait_in_doubt(new_id)
                for seq in pending:
                    await self.sys.resolve(new_id, seq, retry=True, reason="model fork")
            try:
                got = await self.sys.ref(self.cls, new_id).ask(
                    Peek(), message_id=self.fresh("p"), timeout=TIMEOUT / 2
                )
            except TimeoutError:
                raise AssertionError(
                    f"fork {new_id} of {a.actor_id} at {at} does not answer: status "
                    f"{self.sys.status(new_id)}, in doubt {self.sys.in_doubt(new_id)}"
                ) from None
            return pending, got

        try:
            pending, got = self.run(run_fork, f"run fork {new_id}")
        except ActorlogError as exc:
            raise AssertionError(f"fork {new_id} of {a.actor_id} at {at}: {exc!r}") from exc
        where_ = f"fork {new_id} of {a.actor_id} at seq {at}"
        assert set(pending) == set(plan.in_doubt), f"{where_}: in doubt {pending}, {plan}"
        assert got == plan.state, f"{where_}:\n  state    {got!r}\n  expected {plan.state!r}"
        h = self.run(lambda: ops.history(self._reader(), new_id), "history")
        assert h.actor.status not in ("quarantined", "stopped"), f"{where_}: {h.actor}"
        handled = [s.message_id for s in h.steps if s.message_seq <= at]
        for step in h.steps:
            tag = step.body.get("tag") if isinstance(step.body, dict) else None
            for c in step.calls if step.message_seq <= at else ():
                mine = c.key.startswith(f"{new_id}:")
                # a call settled by the fork point keeps the original's key; any other runs
                # (or ran) in the fork with the fork's, and history shows that one (18.12)
                assert mine != (tag in plan.settled), f"{where_}: intent {c.intent_seq} {c}"
        assert handled == plan.ids, f"{where_}: handled {handled}, expected {plan.ids}"
        rerun = [r for r in WORLD.runs[runs:] if r[1] in plan.settled]
        assert not rerun, f"{where_}: re-ran tool calls recorded by seq {at}: {rerun}"
        foreign = [k for k in WORLD.keys[keys:] if k[0] in plan.tags]
        foreign = [k for k in foreign if not k[1].startswith(f"{new_id}:")]
        assert not foreign, f"{where_}: idempotency keys not of the fork: {foreign}"
        if a.snapshot_every == 1 and on("spawn_options"):
            # the source's spawn options hold for the fork: its Peek step was snapshotted
            async def snapshotted() -> list[int]:
                seqs: list[int] = []
                with anyio.move_on_after(2):  # written after the step: wait a little
                    while True:
                        seqs = [
                            v.seq for v in (await ops.history(self._reader(), new_id)).snapshots
                        ]
                        if seqs and seqs[-1] > at:
                            break
                        await anyio.sleep(0.01)
                return seqs

            snaps = self.run(snapshotted, "history")
            assert snaps and snaps[-1] > at, f"{where_}: lost snapshot_every=1: {snaps}"
            plan.model.first_recovery = self.sys.last_recovery(new_id)
        # the original is untouched, but for what the fork sent it again (its own sends)
        again = [f"{tag}=ok" for receiver, tag in plan.resend if receiver == a.actor_id]
        now = self._peek_all()[a.actor_id]
        assert now == "|".join([e for e in (state, *again) if e]), (
            f"{where_}: the original's state changed:\n  now    {now!r}\n  before {state!r}"
        )
        self.actors[new_id] = plan.model
        for receiver, tag in plan.resend:
            self.actors[receiver].extra[tag] += 1

    def _fork_plan(
        self, a: ActorModel, h: ops.History, at: int, new_id: str, state: str
    ) -> ForkPlan:
        """What the fork of ``a`` at ``at`` must be, from the model's records: the messages
        logged by ``at`` (their seqs, from ``a``'s history: the model does not know seqs) and
        ``a``'s state (which the fork's is a part of), the tool ledger and the sends."""
        model = ActorModel(new_id, a.snapshot_every)
        model.plain_spawn = True
        plan = ForkPlan(model=model)
        for s in h.steps:
            if s.message_seq > at:
                continue
            plan.ids.append(s.message_id)
            body = s.body if isinstance(s.body, dict) else {}
            if "tag" not in body or body.get("kind") == "which":
                continue  # a Peek, or which class version runs: no state change
            op = Op(body["tag"], body["kind"], body.get("arg", ""))
            tag = op.tag
            plan.tags.add(tag)
            plan.counts[tag] += 1
            if s.message_id == tag:
                known = a.acked.get(tag) or a.uncertain.get(tag)
                assert known == op, f"{a.actor_id} logged {op}, the model says {known}"
                model.acked[tag] = op
                if op.kind != "boom":
                    model.expected_tags.add(tag)
                if tag in a.replies:
                    model.replies[tag] = copy.deepcopy(a.replies[tag])
            else:
                # another actor's ctx.send (or the original's, copied into a fork)
                sent_here = tag in a.forwards or tag in a.expected_tags
                assert sent_here, f"{a.actor_id} logged {op} from nobody"
                if tag in model.expected_tags:
                    model.extra[tag] += 1  # a fork sent it again, with its own id
                model.expected_tags.add(tag)
            for c in s.calls:
                if c.intent_seq > at:
                    continue
                done = [d for d in c.decisions if d.seq <= at]
                if (c.result_seq is not None and c.result_seq <= at) or any(
                    d.action in ("result", "fail") for d in done
                ):
                    plan.settled.add(tag)
                elif c.policy == "escalate" and (not done or done[-1].action == "attempt"):
                    plan.in_doubt[c.intent_seq] = tag
                    if op.kind == "hang_escalate":  # the model retries it: it runs again
                        plan.retried[tag] = f"h:{tag}"
                        model.replies[tag] = (True, f"h:{tag}")
            sent = any(e.name == "send" and e.seq <= at for e in s.effects)
            if op.kind == "send" and not sent:
                plan.resend.append((op.arg, f"{tag}>"))
            begun = any(c.intent_seq <= at for c in s.calls) or any(e.seq <= at for e in s.effects)
            if begun and (s.step_seq is None or s.step_seq > at):
                STATS["fork_mid_step"] += 1
            if op.kind == "send" and sent:
                STATS["fork_replays_send"] += 1
        STATS["fork_in_doubt"] += len(plan.in_doubt)
        STATS["fork_resends"] += len(plan.resend)
        STATS["fork_settled_calls"] += len(plan.settled)
        # the state entries of the messages logged by ``at``: per tag, the first ones (steps
        # run in log order), not every entry of the tag (a copy a fork sent again after
        # ``at`` has the same tag and another message id: it is not in this fork)
        entries = []
        seen: Counter[str] = Counter()
        for entry in state.split("|"):
            tag = entry.split("=", 1)[0]
            if entry and seen[tag] < plan.counts[tag]:
                seen[tag] += 1
                entries.append(f"{tag}={plan.retried[tag]}" if tag in plan.retried else entry)
        plan.state = "|".join(entries)
        return plan

    @precondition(lambda self: self.passivate_after is not None and self.has_actors())
    @rule(i=st.integers(0, 5))
    def passivate(self, i: int) -> None:
        """An idle actor leaves memory (nothing keeps it: no slot, no waiter) and comes back
        with its state on the next message."""
        a = self.pick_free(i)
        if a is None:
            return
        self._quiesce()

        async def go() -> None:
            while self.sys.status(a.actor_id) != "unknown":
                await anyio.sleep(0.01)

        self.run(go, f"passivation of {a.actor_id} (something keeps it loaded)")

    # -- issue 24: retries -------------------------------------------------------------------

    @precondition(lambda self: self.extended and self.has_actors())
    @rule(
        i=st.integers(0, 5),
        kind=st.sampled_from(["retry_read", "retry_idem"]),
        plan=st.lists(st.sampled_from(["fail", "fail", "hang"]), max_size=4),
    )
    def retry(self, i: int, kind: str, plan: list[str]) -> None:
        """A tool with ``Retry(attempts=4)`` whose attempts fail or hang as planned; a hang is
        a crash during that attempt (the system restarts: the attempt is in doubt and, a read
        or an idempotent write, runs again as the next attempt number). Four attempts that
        did not succeed fail the call; fewer end with the tool's value."""
        if not on("retry"):
            return
        a = self.pick_free(i)
        if a is None:
            return
        if not on("retry_crash"):
            plan = [p for p in plan if p != "hang"]
        if plan.count("hang") > 1 and not on("retry_double_kill"):
            first = plan.index("hang")
            plan = plan[: first + 1] + [p for p in plan[first + 1 :] if p != "hang"]
        if len(plan) == 4 and plan[-1] == "hang":
            plan = plan[:3]  # a crash in the last attempt: what follows is not the model's
        op = Op(self.fresh(), kind)
        a.has_retries = True
        WORLD.attempts[op.tag] = list(plan)
        self.run(lambda: self.sys.ref(self.cls, a.actor_id).send(op, message_id=op.tag), "send")
        self.acknowledge(a, op, None)
        for n in range(1, plan.count("hang") + 1):

            async def hung(n: int = n) -> None:
                while WORLD.hung[op.tag] < n:
                    await anyio.sleep(0.005)

            self.run(hung, f"retry attempt hangs {op.tag} #{n}")
            STATS["retry_crash"] += 1
            self._restart()
        expected = "failed:RetryableError" if len(plan) == 4 else f"rt:{op.tag}"
        self.acknowledge(a, op, self.ask(a, op, op.tag))
        assert a.replies[op.tag] == (True, expected), (
            f"{op.tag} ({kind}, attempts {plan}): {a.replies[op.tag]}, expected {expected!r}"
        )
        runs = [r for r in WORLD.runs if r[1] == op.tag]
        assert len(runs) == min(len(plan) + 1, 4), f"{op.tag} ({plan}) ran {len(runs)} times"
        if kind == "retry_idem":
            keys = {k for t, k in WORLD.keys if t == op.tag}
            assert len(keys) == 1, f"{op.tag}: attempts used several idempotency keys {keys}"

    # -- issue 24: lifecycle -----------------------------------------------------------------

    @precondition(lambda self: self.extended and self.has_actors())
    @rule(
        i=st.integers(0, 5),
        how=st.sampled_from(["stop", "terminate", "cancel", "delete"]),
        queued=st.integers(0, 3),
        after=st.sampled_from(["nothing", "restart", "replay"]),
    )
    def lifecycle(self, i: int, how: str, queued: int, after: str) -> None:
        """A step blocks in a read; ``queued`` asks wait behind it; then the actor ends
        itself (a queued ``ctx.stop`` step, the read released), an operator terminates it
        (``delete`` also deletes it and registers the id again), or cancels the step.
        Queued asks of an ended actor get ``ActorFinishedError`` (recorded steps); of a
        cancelled step's actor their replies; nothing is quarantined, now or after a
        restart."""
        name = "lifecycle_terminate" if how == "delete" else f"lifecycle_{how}"
        if not on(name) or (how == "delete" and not on("lifecycle_delete")):
            return
        if queued and how != "cancel" and not on(f"{name}_queued"):
            queued = 0
        a = self.pick_free(i)
        if a is None or (len(self.live()) < 2 and how != "cancel"):
            return  # keep one actor that takes messages
        hold = Op(self.fresh(), "hang_read")
        stop = Op(self.fresh(), "stop") if how == "stop" else None
        waiting = [Op(self.fresh(), "plain") for _ in range(queued)]
        WORLD.armed.add(hold.tag)
        event = WORLD.hanging.setdefault(hold.tag, anyio.Event())
        ref = self.sys.ref(self.cls, a.actor_id)
        outcomes: dict[str, tuple[str, Any]] = {}

        async def go() -> None:
            await ref.send(hold, message_id=hold.tag)
            await event.wait()
            if stop is not None:
                await ref.send(stop, message_id=stop.tag)
            # the held step's message and intent are logged, and the stop message
            base = (await ops.actor_status(self._reader(), a.actor_id)).last_seq

            async def asker(op: Op) -> None:
                try:
                    outcomes[op.tag] = ("ok", await ref.ask(op, message_id=op.tag))
                except ActorlogError as exc:
                    outcomes[op.tag] = (type(exc).__name__, str(exc))

            async with anyio.create_task_group() as tg:
                for op in waiting:
                    tg.start_soon(asker, op)
                # the asks are durable (logged) before the actor ends: they are queued
                want = base + len(waiting)
                with anyio.move_on_after(TIMEOUT / 2):
                    while (await ops.actor_status(self._reader(), a.actor_id)).last_seq < want:
                        await anyio.sleep(0.005)
                st = await ops.actor_status(self._reader(), a.actor_id)
                assert st.last_seq >= want, (
                    f"{a.actor_id}: {len(waiting)} asks to a busy actor not logged: last seq "
                    f"{st.last_seq}, expected {want}; status {self.sys.status(a.actor_id)}"
                )
                if how in ("stop", "cancel"):
                    if how == "cancel":
                        assert await self.sys.cancel(a.actor_id, reason="model"), "no step"
                    WORLD.released.add(hold.tag)
                else:
                    await self.sys.terminate(a.actor_id, reason="model")
                    WORLD.released.add(hold.tag)
            if how != "cancel":
                ended = "finished" if how == "stop" else "terminated"
                while (await ops.actor_status(self._reader(), a.actor_id)).status != ended:
                    await anyio.sleep(0.005)

        self.run(go, f"lifecycle {how} {a.actor_id} queued {queued}")
        for op in (hold, *([stop] if stop else []), *waiting):
            self.acknowledge(a, op, None)
        if how == "cancel":
            # its step was cancelled (recorded failed), or the tool's return won the race
            a.cancelled.add(hold.tag)
            a.expected_tags.discard(hold.tag)
            for op in waiting:
                self.acknowledge(a, op, (True, outcomes[op.tag][1]))
                assert outcomes[op.tag] == ("ok", "ok"), (op.tag, outcomes[op.tag])
            return
        for op in waiting:
            got = outcomes[op.tag][0]
            assert got == "ActorFinishedError", f"queued ask {op.tag} after {how}: {outcomes}"
        a.ended = "finished" if how == "stop" else "terminated"
        STATS[f"ended_{how}"] += 1
        if how == "delete":
            self._delete_and_reuse(a)
        elif after == "restart":
            self._restart()
        elif after == "replay":
            self._check_ended_spawn(a)

    def _check_ended_spawn(self, a: ActorModel) -> None:
        """An ended actor is not recovered: spawning it and asking it raise
        ``ActorFinishedError``; its status stays what ended it."""

        async def go() -> tuple[str, str]:
            spawned = asked = "no error"
            try:
                await self.sys.spawn(self.cls, a.actor_id)
            except ActorlogError as exc:
                spawned = type(exc).__name__
            try:
                await self.sys.ref(self.cls, a.actor_id).ask(Peek(), message_id=self.fresh("p"))
            except ActorlogError as exc:
                asked = type(exc).__name__
            return spawned, asked

        spawned, asked = self.run(go, f"spawn ended {a.actor_id}")
        assert spawned == asked == "ActorFinishedError", (a.actor_id, a.ended, spawned, asked)

    def _delete_and_reuse(self, a: ActorModel) -> None:
        """Delete the terminated actor; the id registers again from seq 1, empty."""

        async def go() -> tuple[list[int], str]:
            await self.sys.delete(a.actor_id, reason="model")
            try:
                await ops.history(self._reader(), a.actor_id)
            except ActorlogError:
                pass
            else:
                raise AssertionError(f"{a.actor_id} still has a history after delete")
            ref = await self.sys.spawn(self.cls, a.actor_id)
            state = await ref.ask(Peek(), message_id=self.fresh("p"))
            h = await ops.history(self._reader(), a.actor_id)
            return [s.message_seq for s in h.steps], str(state)

        seqs, state = self.run(go, f"delete {a.actor_id}")
        # registered again from seq 1: its one step (the Peek) is message seq 1, empty state
        assert (seqs, state) == ([1], ""), f"{a.actor_id} after delete: steps {seqs}, {state!r}"
        fresh = ActorModel(a.actor_id, None)
        fresh.plain_spawn = True
        self.actors[a.actor_id] = fresh
        STATS["deleted_and_reused"] += 1

    # -- issue 24: compaction ----------------------------------------------------------------

    @precondition(lambda self: self.extended and any(a.snapshot_every == 1 for a in self.live()))
    @rule(i=st.integers(0, 5), live=st.booleans())
    def compact(self, i: int, live: bool) -> None:
        """An operator compacts an actor that snapshots every step (``ops.compact``,
        ``retention="since-snapshot"``): on SQLite with the system stopped (a writable open
        is refused while a runtime holds the file), on MemoryStore also next to it. The
        state, the replies of the kept log and recovery are unchanged."""
        if not on("compaction"):
            return
        snapshotting = [a for a in self.live() if a.snapshot_every == 1 and not a.busy]
        if not snapshotting:
            return
        a = snapshotting[i % len(snapshotting)]
        state = self._quiesce()[a.actor_id]

        async def compact(store: Store) -> ops.CompactResult:
            (done,) = await ops.compact(store, a.actor_id, retention="since-snapshot", by="model")
            return done

        result: list[ops.CompactResult] = []
        if self.store_kind == "sqlite" or not live:

            def offline() -> None:
                async def go() -> None:
                    store = self.make_store()
                    await store.open()
                    try:
                        result.append(await compact(store))
                    finally:
                        if store is not self.memory:
                            await store.close()

                self.run(go, f"compact {a.actor_id} (offline)")

            self._restart(offline)
        else:
            result.append(self.run(partial(compact, self.memory), f"compact {a.actor_id}"))
        h = self.run(lambda: ops.history(self._reader(), a.actor_id), "history")
        kept = {s.message_id for s in h.steps}
        a.compacted |= set(a.acked) - kept
        a.was_compacted = True
        STATS["compacted_entries"] += result[0].removed
        _, now = self.ask(a, Peek(), self.fresh("p"))
        assert now == state, f"{a.actor_id} after compaction: {now!r}, before {state!r}"

    # -- issue 24: changed classes -----------------------------------------------------------

    @precondition(lambda self: self.extended and self.has_actors())
    @rule(
        i=st.integers(0, 5),
        crash=st.sampled_from([None, "hang_read", "hang_idem", "hang_escalate"]),
        live=st.booleans(),
    )
    def upgrade(self, i: int, crash: str | None, live: bool) -> None:
        """A new version of the actor class (a reloaded module: same module, qualified name
        and stable name) replaces the old one: at a restart (``actors=[new]``), maybe with a
        step blocked in a tool (a crash in the middle of it), or live
        (``system.register(new)`` and ``system.restart`` of nothing quarantined is refused;
        new messages of a passivated or restarted actor are handled by the new class).
        Recovered steps replay on the new class without non-determinism."""
        if not on("upgrade") or (live and not on("upgrade_live")):
            return
        if crash is not None and on("hang_then_restart") and not live:
            self.hang(i, crash)
        self.version += 1
        self.cls = make_agent(self.version)
        if live:
            self.sys.register(self.cls)
            # what the loaded actors run is the old class until they next load: restart
            # the system (as a deployment does) to have every actor on the new one
        self._restart()
        STATS["upgrades"] += 1
        for a in self.live():
            if a.busy:
                continue
            ok, which = self.ask(a, Op(self.fresh("w"), "which"), self.fresh("w"))
            assert (ok, which) == (True, f"v{self.version}"), (a.actor_id, ok, which)

    # -- invariants ------------------------------------------------------------------------

    def _quiesce(self) -> dict[str, str]:
        """Wait until every actor not blocked on purpose has handled what it was sent, and
        return their states. A ``Peek`` queues behind everything sent before it; two rounds,
        because a step of one actor may send to another (``ctx.send``)."""
        self._peek_all()
        return self._peek_all()

    @invariant()
    def after_every_rule(self) -> None:
        if self.system is None or not self.actors:
            return
        states = self._quiesce()
        histories = self.run(self._histories, "history")
        for a in self.actors.values():
            h = histories[a.actor_id]
            if a.ended is not None:
                assert h.actor.status == a.ended, (
                    f"{a.actor_id} ended ({a.ended}) shows {h.actor.status}: {h.actor}"
                )
            if on("check_log"):
                self._check_log(a, h)
            if on("check_settled"):
                self._check_settled(a, h)
            if on("check_state"):
                self._check_state(a, states.get(a.actor_id))
        if on("spawn_options"):
            self._check_spawn_options()
        if on("check_no_waiters"):
            self._check_no_waiters()
        if on("check_verify") and (self.passivate_after is None or on("verify_live")):
            # with passivation on, snapshots are written and pruned while verify reads
            report = self.run(lambda: ops.verify(self._reader()), "verify")
            assert report.ok, f"verify: {report.findings}"
        if on("check_replay"):
            self._check_replay(states)

    def _reader(self) -> Store:
        assert self.reader is not None
        return self.reader

    async def _histories(self) -> dict[str, ops.History]:
        return {aid: await ops.history(self._reader(), aid) for aid in self.actors}

    def _peek_all(self) -> dict[str, str]:
        states = {}
        for a in self.actors.values():
            if a.busy or a.ended is not None:
                continue
            ok, state = self.ask(a, Peek(), self.fresh("p"))
            assert ok and isinstance(state, str)
            states[a.actor_id] = state
        return states

    def _check_log(self, a: ActorModel, h: ops.History) -> None:
        """Every acknowledged message is in the log exactly once; once the actor is not
        blocked, every one of them was handled."""
        ids = Counter(s.message_id for s in h.steps)
        twice = [m for m, n in ids.items() if n > 1]
        assert not twice, f"{a.actor_id}: message ids logged twice: {twice}"
        missing = [m for m in a.acked if ids[m] != 1 and m not in a.compacted]
        assert not missing, f"{a.actor_id}: acknowledged messages not in the log: {missing}"
        if not a.busy:
            open_steps = [
                (s.message_id, s.status) for s in h.steps if s.status not in ("ok", "error")
            ]
            assert not open_steps, f"{a.actor_id}: unfinished steps while idle: {open_steps}"

    def _check_settled(self, a: ActorModel, h: ops.History) -> None:
        """A completed step holds no unsettled intent."""
        settled = ("ok", "error", "resolved", "failed_by_operator")
        for s in h.steps:
            if s.status in ("ok", "error"):
                bad = [(c.intent_seq, c.tool, c.status) for c in s.calls if c.status not in settled]
                assert not bad, f"{a.actor_id}: completed step {s.message_seq} holds {bad}"

    def _check_state(self, a: ActorModel, state: str | None) -> None:
        """The state holds each handled tag exactly once (uncertain ones at most once)."""
        if state is None:
            return
        tags = Counter(entry.split("=", 1)[0] for entry in state.split("|") if entry)
        twice = [t for t, n in tags.items() if n > 1 + a.extra[t]]
        assert not twice, f"{a.actor_id}: handled twice: {twice}"
        due = set(a.expected_tags)
        due |= {t for t, sender in a.forwards.items() if not self.actors[sender].busy}
        missing = [t for t in due if tags[t] != 1 + a.extra[t]]
        assert not missing, f"{a.actor_id}: not in the state: {missing} (state {state!r})"
        unknown = set(tags) - a.expected_tags - set(a.forwards) - set(a.uncertain) - a.cancelled
        assert not unknown, f"{a.actor_id}: unexpected entries {unknown}"

    def _check_spawn_options(self) -> None:
        """An actor spawned with snapshot_every=1 snapshots every step, also after it
        passivated or restarted: its recoveries replay at most the step in progress."""
        for a in self.actors.values():
            if a.snapshot_every != 1 or a.ended is not None:
                continue  # an ended actor is not recovered (its spawn is refused)
            rec = self.sys.last_recovery(a.actor_id)
            if rec is not None and rec != a.first_recovery:
                assert rec["steps_replayed"] <= 1, f"{a.actor_id} lost snapshot_every: {rec}"

    def _check_no_waiters(self) -> None:
        """INTERNAL (no public API says it): an idle loaded actor holds no reply slot, no
        in-flight message id. A leftover one is what makes a later ask hang (11.3)."""
        for aid, a in self.actors.items():
            if a.busy:
                continue
            cell = self.sys._cells.get(aid)
            if cell is None or cell.status != "idle":
                continue
            assert not cell.waiters, f"{aid}: reply slots left behind: {sorted(cell.waiters)}"
            assert not cell.inflight_ids, f"{aid}: in-flight ids left: {cell.inflight_ids}"

    def _check_replay(self, live: dict[str, str]) -> None:
        """Live state == the state a fresh system recovers from a copy of the store."""
        if not live:
            return
        if self.store_kind == "memory":
            # in the loop's thread: the runtime may be writing the store (a snapshot)
            copied: Store = self.portal.call(copy.deepcopy, self.memory)
        else:
            target = os.path.join(self.tmp, f"copy{self.counter}.db")
            src = sqlite3.connect(self.path)
            dst = sqlite3.connect(target)
            try:
                src.backup(dst)
            finally:
                src.close()
                dst.close()
            copied = SqliteStore(target)

        async def go() -> dict[str, str]:
            got = {}
            async with ActorSystem(
                copied, actors=[self.cls], shutdown_grace=0, recover_on_start=False
            ) as fresh:
                for aid in live:
                    ref = await fresh.spawn(self.cls, aid)
                    got[aid] = await ref.ask(Peek(), message_id=self.fresh("replay"))
            return got

        recovered = self.run(go, "replay on a copy")
        for aid, state in live.items():
            # the copy was taken after the live peek: both saw the same handled messages
            assert recovered[aid] == state, (
                f"{aid}: live state differs from the recovered one:\n"
                f"  live      {state!r}\n  recovered {recovered[aid]!r}"
            )
        if self.store_kind == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(target + suffix):
                    os.remove(target + suffix)
