"""``Context``: every effect a handler makes goes through it, and is logged first.

In a live step each effect is written to the journal before it happens (a tool's intent is
made durable before the tool runs). In a replayed step each effect is served from the log
by its identity ([F18]): the task of the step that asks for it (``_tasks``) and its number
within that task; asking for a different effect than the one recorded there is
non-determinism and stops the actor without calling anything.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

import anyio
import anyio.lowlevel

from .._durability.events import Emitter, encode_event
from .._journal import codec as _codec, names as _names, records as _records
from .._journal.door import Letter, admit_message
from .._journal.errors import (
    ActorlogError,
    ConfigurationError,
    EncodeError,
    NonDeterminismError,
    StepCancelledError,
    ToolCallError,
)
from .._journal.ids import step_key
from .._journal.records import EffectRecord, EntryKind, ErrorInfo, IntentRecord, Recorded, SettledBy
from .._tracing.telemetry import CALL_TASK
from . import tasks as _tasks
from .calls import StepHost, not_started_error
from .ctxtasks import StepTasks, by_task
from .ctxtimers import TimerEffects, check_ref
from .indoubt import InDoubtCalls
from .tasks import Node
from .tools import Tool, as_tool, unwrap_partial

if TYPE_CHECKING:
    import uuid as _uuid

    from .ref import ActorRef
    from .sequencer import Sequencer

__all__ = ["VERSION_TAG", "Context"]

#: the type tag of a version gate's effect entry (``ctx.version``)
VERSION_TAG = "version"

R = TypeVar("R")
A = TypeVar("A")


def _same(got: Any, recorded: Any) -> bool:
    """Does the plain value the handler gives now equal the recorded one? A set compares as a
    set also against a log written before sets had one canonical order ([F9a]). Equal as
    they are is equal after a JSON round trip too: compared first, without it."""
    same = got == recorded or json.loads(json.dumps(got)) == recorded
    return same or _codec.same_plain(got, recorded)


def _describe(tag: str, args: Any = None, kwargs: Any = None) -> str:
    if args is None and kwargs is None:
        return tag
    a = ", ".join(
        [json.dumps(x) for x in args or []]
        + [f"{k}={json.dumps(v)}" for k, v in (kwargs or {}).items()]
    )
    return f"{tag}({a})"


class Context(StepTasks, InDoubtCalls, TimerEffects):
    """The handler's door to the world. One per step; do not keep it after ``receive``."""

    # Defaults shared by every step until one sets its own (a live step of one task that
    # makes a call sets none of them). The handler returned: effects from its tasks refused
    ended = False
    #: replaying effects of several tasks: hands their outcomes back in log order
    _compat: bool | None = None
    _seq: Sequencer | None = None
    #: an error that must stop the actor even if the handler swallows it
    fatal: BaseException | None = None
    effects_from_log = 0
    awaited = 0.0
    #: ``ctx.stop()`` was called: the reason it gave (None: not called)
    stopped: str | None = None
    #: replaying a step an operator cancelled: the scope to cancel where its log ends
    cancel_replay: Any = None
    #: hands ``emit``'s events to the streaming callers, made at the first ``emit`` from
    #: ``_emits`` (the cell's waiters, journal, step span: a live or resumed step's only)
    emitter: Emitter | None = None
    _emits: tuple[dict[int, Any], Any, Any] | None = None

    def __init__(
        self,
        cell: StepHost,
        step_seq: int,
        recorded: list[Recorded] | None = None,
        *,
        complete: bool = False,
        incarnation: str | None = None,
    ) -> None:
        self._cell = cell
        self.step_seq = step_seq
        #: [F13] the incarnation id recorded in this step's message (part of its keys)
        self.incarnation = incarnation
        #: [F18] the recorded effects of each task of the step ("" is the handler's own)
        self._tasks = by_task(recorded) if recorded else {"": []}  # (live: no call)
        if len(self._tasks) > 1:  # replaying effects of several tasks: in log order
            from .sequencer import Sequencer  # only for effects of several tasks

            self._seq = Sequencer.of(recorded or [], self._stuck)
        self._complete = complete
        #: the handler's own task; the tasks it spawns are its descendants (``_tasks``)
        self.root = Node(self)
        #: task path -> node, of every task of this step seen so far
        self.nodes: dict[str, Node] = {"": self.root}
        self._thread = threading.get_ident()
        #: intents of this step running (or waiting for an operator) now: seq -> tool name
        self._open: dict[int, str] = {}
        #: intents whose current attempt may have taken effect (``_calls``, ``_indoubt``)
        self._in_flight: set[int] = set()
        #: tool name -> (effect, policy) of the calls this step ran (for a cancel's record)
        self.open_tools: dict[str, tuple[str, str]] = {}

    # -- public surface --------------------------------------------------------------------

    @property
    def fencing_token(self) -> int:
        """The fencing token of this actor's lease on this runtime: it grows every time the
        actor changes owner, so an external system that remembers the highest token it has
        seen per actor and refuses lower ones refuses a runtime that lost the actor (a tool
        that declares a ``fencing_token`` keyword gets it too). ``0`` without leases (SQLite,
        memory, or no ``owner=``): one writer only, lower than any PostgreSQL token."""
        return self._cell.fencing_token

    @property
    def replaying(self) -> bool:
        """True while effects of the calling task are being served from the log."""
        node = _tasks.current()
        if node is None or node.owner is not self:
            node = self.root
        return node.index < len(self._tasks.get(node.task, ())) or self._complete

    def emit(self, obj: Any, /) -> None:
        """Send a progress event to the callers streaming this step (``ref.ask_stream``).

        Synchronous and never blocking: the event is put into each streaming caller's
        bounded buffer (a full one drops it: that caller sees a gap). Events are not logged:
        a resumed run emits them again (docs/streaming.md). Call it from the handler, its
        tasks, or a tool it is running, in the event loop's thread, while the step runs.

        Raises:
            EncodeError: ``obj`` cannot be encoded by the codec (as a message field), or
                encodes to more than 1 MiB; nothing was emitted.
            ConfigurationError: called from another thread or after the handler returned.
        """
        if threading.get_ident() != self._thread or self.ended:
            where = "from another thread" if not self.ended else "after the handler returned"
            raise ConfigurationError(
                f"ctx.emit() was called {where}: call it while the step runs, in the event "
                "loop's thread"
            )
        data = encode_event(obj)
        emitter = self.emitter
        if emitter is None and self._emits is not None:
            waiters, journal, span = self._emits
            emitter = self.emitter = Emitter(waiters, self.step_seq, journal, span)
        if emitter is not None:
            emitter.emit(data, self.replaying)

    def stop(self, reason: str = "") -> None:
        """Finish this actor when this step ends: a ``finish`` effect is logged with the
        step (durable with it), and from then on the actor takes no more messages (they
        raise ``ActorFinishedError``), is not recovered at start, and its ``spawn`` raises
        ``ActorFinishedError``. Its log stays for audit until ``system.delete``. The
        step itself completes normally (its reply reaches its ``ask``)."""
        _codec.validate_text(reason, "reason")
        value = self._effect("finish", lambda: {"reason": reason}, "ctx.stop()")
        self.stopped = str(value.get("reason", "")) if isinstance(value, dict) else ""

    @overload
    async def call(self, tool: Tool[..., R], /, *args: Any, **kwargs: Any) -> R: ...
    @overload
    async def call(self, tool: Callable[..., Awaitable[R]], /, *args: Any, **kwargs: Any) -> R: ...

    async def call(self, tool: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Run a tool durably: the intent is logged (and fsynced) before it runs, the result
        after. On replay the recorded result is returned (or the recorded error raised as
        ``ToolCallError``) without running the tool. ``tool`` may be a
        ``functools.partial`` of a tool: it is logged as that tool, with the frozen arguments
        in front of the given ones.

        Raises:
            ToolCallError: the tool raised (now, or when it was recorded).
            ConfigurationError: the arguments do not fit the tool's signature or cannot be
                encoded; nothing was logged.
            NonDeterminismError: replay expected a different effect here.
        """
        node = self._task("ctx.call()")
        t0 = time.perf_counter()
        # ``_tasks.calling_outside(node.task)``, inlined (spawns: not the step's)
        outside = _tasks.NODE.set(None)
        calling = CALL_TASK.set(node.task)
        try:
            return await self._call(node, tool, args, kwargs)
        finally:
            CALL_TASK.reset(calling)
            _tasks.NODE.reset(outside)
            # time awaiting the effect (tool, commit): replay serves it from the log, so it
            # is not part of the step's replay cost (see RecoveryCost)
            self.awaited += time.perf_counter() - t0

    async def _call(
        self, node: Node, tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if type(tool) is Tool:  # a declared tool, as given (not a partial of one)
            t: Tool[Any, Any] = tool
        else:
            tool, args, kwargs = unwrap_partial(tool, args, kwargs)
            t = as_tool(tool)
        if kwargs or len(args) != t._arity:  # ``t.check_call``'s fast case, inlined
            t.bind(args, kwargs)
        what = f"arguments of tool {t.name}"
        index = node.index
        # Live, the intent entry's encode is the check (arguments encoded once); compared
        # with a recorded intent (or described in an error) they are checked here first.
        check = index < len(self._tasks.get(node.task, ())) or self._complete
        args_plain = _codec.to_plain(list(args), what, check=check) if args else []
        kwargs_plain = _codec.to_plain(dict(kwargs), what, check=check) if kwargs else {}
        node.index += 1
        cell = self._cell
        key = step_key(cell.actor_id, self.step_seq, index, self.incarnation, node.task)
        # past its task's recorded effects, live: nothing to compare (``_expect`` is None)
        rec = None
        if check:
            rec = self._expect(node, index, EntryKind.INTENT, t.name, args_plain, kwargs_plain)
        if self._seq is not None:
            await self._ordered(node, rec)
        if rec is None:
            policy = t.policy
            try:
                intent_seq = cell.journal.write(
                    EntryKind.INTENT,
                    t.name,
                    self.step_seq,
                    _records.intent_payload(
                        index=index,
                        task=node.task,
                        effect=t.effect,
                        policy=policy,
                        args=args_plain,
                        kwargs=kwargs_plain,
                        key=key,
                    ),
                )
            except EncodeError as exc:  # nothing was written: the effect index is as before
                node.index = index
                raise EncodeError(what, "list", exc.reason) from exc
            # open from here: a handler's scope that cancels it while its intent commits
            # (a race's loser) settles it, as it does once the tool runs (issue 25)
            self._open[intent_seq] = t.name
            self.open_tools[t.name] = (t.effect, policy)
            try:  # ``_flush_before_tool``, inlined (once a call)
                if len(self.nodes) > 1:
                    await anyio.lowlevel.cancel_shielded_checkpoint()
                try:
                    await cell.journal.flush()
                except ActorlogError as exc:
                    self.fatal = self.fatal or exc  # (``_guard``)
                    raise
            except anyio.get_cancelled_exc_class():
                if intent_seq in self._open and self._handler_cancelled():
                    del self._open[intent_seq]
                    cell.journal.write(
                        EntryKind.RESULT,
                        t.name,
                        intent_seq,
                        _records.result_payload(
                            error=not_started_error(), settled_by=SettledBy.CANCELLED
                        ),
                    )
                raise
            return await self._run(t, args, kwargs, intent_seq, key, attempt=1, policy=policy)
        # counted in _settle, only when the outcome is served from the log (an in-doubt
        # call settled by its policy or an operator runs live); check_call above checked
        # the arguments against the signature
        return await self._settle(t, rec, args, kwargs, key)

    def now(self) -> datetime.datetime:
        """The current time (UTC), recorded; replay returns the recorded time."""
        ts = self._effect("now", time.time, "ctx.now()")
        return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC)

    def random(self) -> float:
        """A random float in [0, 1), recorded."""
        import random as _random  # here: only handlers that ask for it import it

        return float(self._effect("random", _random.random, "ctx.random()"))

    def uuid(self) -> _uuid.UUID:
        """A random UUID, recorded."""
        import uuid as _uuid

        return _uuid.UUID(self._effect("uuid", lambda: _uuid.uuid4().hex, "ctx.uuid()"))

    def version(self, change_id: str, /, *, default: int = 1, max: int = 2) -> int:
        """A version gate: which version of the code named ``change_id`` this step runs.

        A step recorded before the gate existed (by code that had no such call here) gets
        ``default``, so its replay takes the old branch; a new step gets ``max``, recorded
        in the log as an effect, so its replay takes the same branch even after ``max``
        grows. Gate every change to the effects a handler makes (docs/upgrading.md)::

            if ctx.version("add-lookup", max=2) >= 2:
                await ctx.call(lookup, q)

        Raises:
            ConfigurationError: bad arguments (``default <= max``, a non-empty id).
            NonDeterminismError: the step recorded a version above ``max`` or below
                ``default`` (code rolled back, or support for that version removed).
        """
        _codec.validate_stable_name(change_id, "ctx.version: change_id")
        if type(default) is not int or type(max) is not int or default > max:
            raise ConfigurationError(
                f"ctx.version({change_id!r}): default and max must be ints with default <= max "
                f"(got default={_codec.shown(default)}, max={_codec.shown(max)})"
            )
        node = self._task("ctx.version()")
        index = node.index
        rec = self._recorded_at(node, index)
        marker = _version_marker(rec)
        if marker is not None and marker[0] == change_id:
            node.index += 1
            self.effects_from_log += 1
            got = marker[1]
            if not default <= got <= max:
                self._nondeterminism(
                    node,
                    index,
                    f"version {got} of {change_id!r} (seq {rec.seq if rec else 0})",
                    f"a version from {default} to {max}",
                )
            return got
        if rec is not None or self._complete:
            # recorded before this gate existed: the code of that time, the old branch
            return default
        node.index += 1
        self._cell.journal.write(
            EntryKind.EFFECT,
            VERSION_TAG,
            self.step_seq,
            _records.effect_payload(
                index=index, value={"change": change_id, "version": max}, task=node.task
            ),
        )
        return max

    def patched(self, change_id: str, /) -> bool:
        """``ctx.version(change_id, default=1, max=2) >= 2``: True for a step recorded with
        (or running) the patched code, False for one recorded before the patch."""
        return self.version(change_id, default=1, max=2) >= 2

    async def send(self, ref: ActorRef[Any], msg: Any, /) -> None:
        """Send ``msg`` to another actor, exactly once. The send is logged here first; the
        message id is derived from this step, so a replay re-delivers it and the receiver
        deduplicates it."""
        check_ref(ref, "ctx.send()")  # every check before the effect index moves
        letter = admit_message(self._cell.registry, msg)
        letter.encoded()  # it fits in the receiver's log: checked before the send is logged
        node = self._task("ctx.send()")
        with _tasks.outside():
            await self._send(node, ref, letter, type(msg))

    async def _send(self, node: Node, ref: ActorRef[Any], letter: Letter, cls: type) -> None:
        index = node.index
        mid = self._effect_id(node, index)
        value = {
            "target": ref.actor_id,
            "message_type": letter.type_tag,
            "message_id": mid,
        }
        recorded = self._recorded_at(node, index)
        # the tag as recorded where it is an alias of the message class's
        value["message_type"] = _names.replay_tag(cls, recorded, "message_type")
        node.index += 1
        if recorded is not None and recorded.type_tag == "send":
            # A recorded send keeps its recorded message id: in a fork's copied history it
            # is the original's, and re-delivering it must deduplicate against that one.
            logged = _effect_value(recorded)
            logged_mid = logged.get("message_id") if isinstance(logged, dict) else None
            if isinstance(logged_mid, str):
                value["message_id"] = mid = logged_mid
        rec = self._expect(node, index, EntryKind.EFFECT, "send", value)
        if rec is not None:
            self.effects_from_log += 1
            self._recorded_failure(node, "send")
            if self._complete or node.index < len(self._tasks.get(node.task, ())):
                return  # delivered: the task went on (or the step completed) after it
        else:
            if self._seq is not None:
                await self._seq.drained(node)
            self._cell.journal.write(
                EntryKind.EFFECT,
                "send",
                self.step_seq,
                _records.effect_payload(index=index, value=value, task=node.task),
            )
        try:
            if rec is None:
                await self._guard(self._cell.journal.flush())
            await self._delivery(node, "send", self._cell.deliver(ref, letter, message_id=mid))
        except anyio.get_cancelled_exc_class():
            if not self._handler_cancelled():
                raise  # the runtime's cancel: the step is not complete, recovery re-delivers
            # The handler's own scope (a race won elsewhere, a deadline): the send is logged,
            # and the completed step's log will say it was sent, so it is delivered anyway
            # (the receiver deduplicates it by its id) before the cancel goes on.
            with anyio.CancelScope(shield=True):
                await self._guard(self._cell.journal.flush())
                try:
                    await self._delivery(
                        node, "send", self._cell.deliver(ref, letter, message_id=mid)
                    )
                except ToolCallError:
                    pass  # its failure is recorded (send.failed); the task is cancelled
            raise

    async def spawn(self, cls: type[A], actor_id: str, /, **options: Any) -> ActorRef[A]:
        """Spawn (or resume) another actor, recorded."""
        _codec.validate_actor_id(actor_id)
        _names.check_actor_class(cls)
        node = self._task("ctx.spawn()")
        index = node.index
        # every check before the effect index moves
        value = {"actor_type": _codec.type_tag(cls), "actor_id": actor_id}
        value["actor_type"] = _names.replay_tag(cls, self._recorded_at(node, index), "actor_type")
        node.index += 1
        rec = self._expect(node, index, EntryKind.EFFECT, "spawn", value)
        host = self._cell
        with _tasks.outside():
            if rec is not None:
                self.effects_from_log += 1
                self._recorded_failure(node, "spawn")
                if self._complete:
                    return host.ref(cls, actor_id)
            else:
                if self._seq is not None:
                    await self._seq.drained(node)
                self._cell.journal.write(
                    EntryKind.EFFECT,
                    "spawn",
                    self.step_seq,
                    _records.effect_payload(index=index, value=value, task=node.task),
                )
                await self._guard(self._cell.journal.flush())
            return await self._delivery(node, "spawn", host.spawn(cls, actor_id, **options))

    # -- internals -------------------------------------------------------------------------

    def _effect_id(self, node: Node, index: int) -> str:
        """[F13] The id of effect ``index`` of this step, for a ``ctx.send`` message id and a
        ``send_later`` timer id: ``"{actor}/{incarnation}/{step seq}/{index}"`` (without the
        incarnation for a message logged before incarnations existed), so a new actor under
        a reused id never collides with the ids its predecessor left at the receiver.
        [F18] An effect of a task the handler spawned ends in ``"{task}.{index}"``."""
        last = f"{node.task}.{index}" if node.task else str(index)
        if self.incarnation is None:
            return f"{self.actor_id}/{self.step_seq}/{last}"
        return f"{self.actor_id}/{self.incarnation}/{self.step_seq}/{last}"

    def _recorded_at(self, node: Node, index: int) -> Recorded | None:
        recorded = self._tasks.get(node.task)
        return recorded[index] if recorded is not None and index < len(recorded) else None

    def _next_recorded_args(self) -> list[Any] | None:
        """The arguments of the intent recorded at the next effect position, or None (live,
        or another kind of effect there). For integrations whose logged arguments changed
        between versions: they match the shape the log holds."""
        node = _tasks.current()
        if node is None or node.owner is not self:
            node = self.root
        rec = self._recorded_at(node, node.index)
        intent = None if rec is None else _intent(rec)
        return None if intent is None else intent.args

    async def _delivery(self, node: Node, tag: str, aw: Awaitable[R]) -> R:
        """Await a send's delivery or a spawn. Its failure (the target is quarantined, the id
        exists with another class, ...) is that effect's error: recorded in this actor's log
        as a ``<tag>.failed`` effect and raised as ``ToolCallError`` (tool ``ctx.<tag>``),
        the same on replay; this actor's own log is intact, so it goes on. Only this actor's
        journal failing, or the system closing, stops it."""
        try:
            return await aw
        except ActorlogError as exc:
            if self._cell.journal.broken is not None or self._cell.closing:
                self.fatal = self.fatal or exc
                raise
            index = node.index
            node.index += 1
            info = ErrorInfo.of(exc)
            self._cell.journal.write(
                EntryKind.EFFECT,
                f"{tag}.failed",
                self.step_seq,
                _records.effect_payload(index=index, value=info.payload(), task=node.task),
            )
            raise ToolCallError(f"ctx.{tag}", info.type, info.message) from exc

    def _recorded_failure(self, node: Node, tag: str) -> None:
        """On replay: raise the recorded failure of the send/spawn just served, if any."""
        rec = self._recorded_at(node, node.index)
        if rec is not None and rec.kind == EntryKind.EFFECT and rec.type_tag == f"{tag}.failed":
            node.index += 1
            self.effects_from_log += 1
            try:
                err = ErrorInfo.from_plain(_effect_value(rec))
            except ValueError:
                err = ErrorInfo("None", "None")  # as recorded: not an error object
            raise ToolCallError(f"ctx.{tag}", err.type, err.message)

    def _effect(self, tag: str, make: Callable[[], Any], what: str) -> Any:
        node = self._task(what)
        index = node.index
        node.index += 1
        rec = self._expect(node, index, EntryKind.EFFECT, tag, None)
        if rec is not None:
            self.effects_from_log += 1
            return _effect_value(rec)
        value = make()
        self._cell.journal.write(
            EntryKind.EFFECT,
            tag,
            self.step_seq,
            _records.effect_payload(index=index, value=value, task=node.task),
        )
        return self._logged(value)

    def _expect(
        self, node: Node, index: int, kind: str, tag: str, args: Any, kwargs: Any = None
    ) -> Recorded | None:
        """The effect recorded as number ``index`` of ``node``'s task if it matches; None
        if that task is past its recorded effects."""
        rec = self._recorded_at(node, index)
        if rec is not None and self._seq is not None:
            self._seq.asked(rec.seq)
        if rec is None:
            if self._complete and self.cancel_replay is not None:
                # an operator cancelled this step live at this point: cancel it here too
                self.cancel_replay.cancel()
                raise StepCancelledError(self.actor_id, self.step_seq, "StepCancelledError", "")
            if self._complete:
                end = "the end of the step" if not node.task else f"the end of task {node.task}"
                self._nondeterminism(
                    node, index, end, _describe(tag, *self._args(kind, args, kwargs))
                )
            return None
        if rec.kind != kind or rec.type_tag != tag:
            self._nondeterminism(
                node,
                index,
                self._describe_rec(rec),
                _describe(tag, *self._args(kind, args, kwargs)),
            )
        intent = _intent(rec)
        if intent is not None:
            if not _same(args, intent.args) or not _same(kwargs, intent.kwargs):
                self._nondeterminism(
                    node, index, self._describe_rec(rec), _describe(tag, args, kwargs)
                )
        elif args is not None and not _same(args, _effect_value(rec)):
            recorded = json.dumps(_effect_value(rec))
            self._nondeterminism(node, index, f"{tag} {recorded}", f"{tag} {json.dumps(args)}")
        return rec

    @staticmethod
    def _args(kind: str, args: Any, kwargs: Any) -> tuple[Any, Any]:
        if kind == EntryKind.INTENT:
            return args, kwargs
        return None, None

    @staticmethod
    def _describe_rec(rec: Recorded) -> str:
        intent = _intent(rec)
        if intent is not None:
            call = _describe(rec.type_tag, intent.args, intent.kwargs)
            return f"tool {call} (seq {rec.seq})"
        return f"{rec.type_tag} (seq {rec.seq})"

    def _nondeterminism(self, node: Node, index: int, expected: str, got: str) -> None:
        exc = NonDeterminismError(self.actor_id, self.step_seq, index, expected, got, node.task)
        self.fatal = self.fatal or exc
        raise exc


def _version_marker(rec: Recorded | None) -> tuple[str, int] | None:
    """``(change_id, version)`` if ``rec`` is a recorded version gate."""
    if rec is None or rec.kind != EntryKind.EFFECT or rec.type_tag != VERSION_TAG:
        return None
    value = _effect_value(rec)
    if not isinstance(value, dict):
        return None
    change, version = value.get("change"), value.get("version")
    if isinstance(change, str) and type(version) is int:
        return change, version
    return None


def _intent(rec: Recorded) -> IntentRecord | None:  # the recorded tool call, if it is one
    return rec.record if isinstance(rec.record, IntentRecord) else None


def _effect_value(rec: Recorded) -> Any:  # a recorded plain effect's value (None: a call)
    return rec.record.value if isinstance(rec.record, EffectRecord) else None
