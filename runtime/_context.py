"""``Context``: every effect a handler makes goes through it, and is logged first.

In a live step each effect is written to the journal before it happens (a tool's intent is
made durable before the tool runs). In a replayed step each effect is served from the log
in order; asking for a different effect than the one recorded at that position is
non-determinism and stops the actor without calling anything.
"""

from __future__ import annotations

import datetime
import json
import random as _random
import time
import uuid as _uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

import attrs
from opentelemetry.trace import Status, StatusCode

from . import _codec, _records, _telemetry
from ._errors import ActorlogError, EncodeError, NonDeterminismError, ToolCallError
from ._telemetry import ATTR, SPAN, tracer
from ._tools import Happened, NotHappened, Tool, as_tool

if TYPE_CHECKING:
    from ._actor import Actor
    from ._cell import Cell
    from ._system import ActorRef

__all__ = ["Context", "Recorded", "idempotency_key"]

R = TypeVar("R")
A = TypeVar("A", bound="Actor[Any]")


def idempotency_key(actor_id: str, step_seq: int, index: int) -> str:
    """[F13] The stable idempotency key of call ``index`` of the step handling message
    ``step_seq``: the same on every replay and restart, unique per call."""
    return f"{actor_id}:{step_seq}:{index}"


@attrs.define
class Recorded:
    """One effect recorded for a step: an intent (with what settled it) or a plain effect."""

    kind: str  # "intent" | "effect"
    seq: int
    type_tag: str
    payload: dict[str, Any]
    #: for intents: the result/decision payloads that refer to it, in log order
    outcomes: list[tuple[str, str, dict[str, Any]]] = attrs.Factory(list)


def _normalize(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _describe(tag: str, args: Any = None, kwargs: Any = None) -> str:
    if args is None and kwargs is None:
        return tag
    a = ", ".join(
        [json.dumps(x) for x in args or []]
        + [f"{k}={json.dumps(v)}" for k, v in (kwargs or {}).items()]
    )
    return f"{tag}({a})"


class Context:
    """The handler's door to the world. One per step; do not keep it after ``receive``."""

    def __init__(
        self,
        cell: Cell,
        step_seq: int,
        recorded: list[Recorded] | None = None,
        *,
        complete: bool = False,
    ) -> None:
        self._cell = cell
        self.step_seq = step_seq
        self._recorded = recorded or []
        self._complete = complete
        self._index = 0
        #: an error that must stop the actor even if the handler swallows it
        self.fatal: BaseException | None = None
        self.effects_from_log = 0
        self.awaited = 0.0

    # -- public surface --------------------------------------------------------------------

    @property
    def actor_id(self) -> str:
        return self._cell.actor_id

    @property
    def replaying(self) -> bool:
        """True while effects are being served from the log."""
        return self._index < len(self._recorded) or self._complete

    @overload
    async def call(self, tool: Tool[..., R], /, *args: Any, **kwargs: Any) -> R: ...
    @overload
    async def call(self, tool: Callable[..., Awaitable[R]], /, *args: Any, **kwargs: Any) -> R: ...

    async def call(self, tool: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Run a tool durably: the intent is logged (and fsynced) before it runs, the result
        after. On replay the recorded result is returned (or the recorded error raised as
        ``ToolCallError``) without running the tool.

        Raises:
            ToolCallError: the tool raised (now, or when it was recorded).
            ConfigurationError: the arguments do not fit the tool's signature or cannot be
                encoded; nothing was logged.
            NonDeterminismError: replay expected a different effect here.
        """
        t0 = time.perf_counter()
        try:
            return await self._call(tool, args, kwargs)
        finally:
            # time awaiting the effect (tool, commit): replay serves it from the log, so it
            # is not part of the step's replay cost (see RecoveryCost)
            self.awaited += time.perf_counter() - t0

    async def _call(self, tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        t = as_tool(tool)
        bound = t.bind(args, kwargs)
        what = f"arguments of tool {t.name}"
        index = self._index
        # Live, the intent entry's encode is the check (arguments encoded once); compared
        # with a recorded intent (or described in an error) they are checked here first.
        check = index < len(self._recorded) or self._complete
        args_plain = _codec.to_plain(list(args), what, check=check)
        kwargs_plain = _codec.to_plain(dict(kwargs), what, check=check)
        self._index += 1
        key = idempotency_key(self.actor_id, self.step_seq, index)
        rec = self._expect(index, "intent", t.name, args_plain, kwargs_plain)
        if rec is None:
            cell = self._cell
            try:
                intent_seq = cell.journal.write(
                    "intent",
                    t.name,
                    self.step_seq,
                    _records.intent_payload(
                        index=index,
                        effect=t.effect,
                        policy=t.policy,
                        args=args_plain,
                        kwargs=kwargs_plain,
                        key=key,
                    ),
                )
            except EncodeError as exc:  # nothing was written
                raise EncodeError(what, "list", exc.reason) from exc
            await self._guard(cell.journal.flush())
            return await self._run(t, args, kwargs, intent_seq, key, attempt=1)
        self.effects_from_log += 1
        return await self._settle(t, rec, args, kwargs, bound.arguments, key)

    def now(self) -> datetime.datetime:
        """The current time (UTC), recorded; replay returns the recorded time."""
        ts = self._effect("now", time.time)
        return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC)

    def random(self) -> float:
        """A random float in [0, 1), recorded."""
        return float(self._effect("random", _random.random))

    def uuid(self) -> _uuid.UUID:
        """A random UUID, recorded."""
        return _uuid.UUID(self._effect("uuid", lambda: _uuid.uuid4().hex))

    async def send(self, ref: ActorRef[Any], msg: Any, /) -> None:
        """Send ``msg`` to another actor, exactly once. The send is logged here first; the
        message id is derived from this step, so a replay re-delivers it and the receiver
        deduplicates it."""
        _codec.check_attrs_instance(msg, "message")
        _codec.to_plain(msg, "message")
        index = self._index
        self._index += 1
        mid = f"{self.actor_id}/{self.step_seq}/{index}"
        value = {
            "target": ref.actor_id,
            "message_type": _codec.type_tag(type(msg)),
            "message_id": mid,
        }
        recorded = self._recorded[index] if index < len(self._recorded) else None
        if recorded is not None and recorded.kind == "effect" and recorded.type_tag == "send":
            # A recorded send keeps its recorded message id: in a fork's copied history it
            # is the original's, and re-delivering it must deduplicate against that one.
            logged_mid = (recorded.payload.get("value") or {}).get("message_id")
            if isinstance(logged_mid, str):
                value["message_id"] = mid = logged_mid
        rec = self._expect(index, "effect", "send", value)
        if rec is not None:
            self.effects_from_log += 1
            if self._complete:
                return  # a completed step's sends were delivered before it completed
        else:
            self._cell.journal.write(
                "effect", "send", self.step_seq, _records.effect_payload(index=index, value=value)
            )
            await self._guard(self._cell.journal.flush())
        await self._guard(
            self._cell.system._deliver(ref, msg, message_id=mid, sender=self.actor_id)
        )

    async def spawn(self, cls: type[A], actor_id: str, /, **options: Any) -> ActorRef[A]:
        """Spawn (or resume) another actor, recorded."""
        _codec.validate_actor_id(actor_id)
        index = self._index
        self._index += 1
        value = {"actor_type": _codec.type_tag(cls), "actor_id": actor_id}
        rec = self._expect(index, "effect", "spawn", value)
        system = self._cell.system
        if rec is not None:
            self.effects_from_log += 1
            if self._complete:
                return system.ref(cls, actor_id)
        else:
            self._cell.journal.write(
                "effect", "spawn", self.step_seq, _records.effect_payload(index=index, value=value)
            )
            await self._guard(self._cell.journal.flush())
        return await self._guard(system.spawn(cls, actor_id, **options))

    # -- internals -------------------------------------------------------------------------

    async def _guard(self, aw: Awaitable[R]) -> R:
        """Await infrastructure work; its failure stops the actor even if the handler
        catches the exception."""
        try:
            return await aw
        except ActorlogError as exc:
            if not isinstance(exc, ToolCallError):
                self.fatal = self.fatal or exc
            raise

    def _effect(self, tag: str, make: Callable[[], Any]) -> Any:
        index = self._index
        self._index += 1
        rec = self._expect(index, "effect", tag, None)
        if rec is not None:
            self.effects_from_log += 1
            return rec.payload["value"]
        value = make()
        self._cell.journal.write(
            "effect", tag, self.step_seq, _records.effect_payload(index=index, value=value)
        )
        return value

    def _expect(
        self, index: int, kind: str, tag: str, args: Any, kwargs: Any = None
    ) -> Recorded | None:
        """The recorded effect at ``index`` if it matches; None if we are past the log."""
        if index >= len(self._recorded):
            if self._complete:
                self._nondeterminism(
                    index, "the end of the step", _describe(tag, *self._args(kind, args, kwargs))
                )
            return None
        rec = self._recorded[index]
        if rec.kind != kind or rec.type_tag != tag:
            self._nondeterminism(
                index, self._describe_rec(rec), _describe(tag, *self._args(kind, args, kwargs))
            )
        if kind == "intent":
            if _normalize(args) != rec.payload.get("args") or _normalize(kwargs) != rec.payload.get(
                "kwargs"
            ):
                self._nondeterminism(index, self._describe_rec(rec), _describe(tag, args, kwargs))
        elif args is not None and _normalize(args) != rec.payload.get("value"):
            self._nondeterminism(
                index, f"{tag} {json.dumps(rec.payload.get('value'))}", f"{tag} {json.dumps(args)}"
            )
        return rec

    @staticmethod
    def _args(kind: str, args: Any, kwargs: Any) -> tuple[Any, Any]:
        if kind == "intent":
            return args, kwargs
        return None, None

    @staticmethod
    def _describe_rec(rec: Recorded) -> str:
        if rec.kind == "intent":
            call = _describe(rec.type_tag, rec.payload.get("args"), rec.payload.get("kwargs"))
            return f"tool {call} (seq {rec.seq})"
        return f"{rec.type_tag} (seq {rec.seq})"

    def _nondeterminism(self, index: int, expected: str, got: str) -> None:
        exc = NonDeterminismError(self.actor_id, self.step_seq, index, expected, got)
        self.fatal = self.fatal or exc
        raise exc

    def check_consumed(self) -> None:
        """After a replayed handler returns: every recorded effect must have been asked for."""
        if self.fatal is None and self._index < len(self._recorded):
            rec = self._recorded[self._index]
            self._nondeterminism(self._index, self._describe_rec(rec), "the end of the step")

    def _value(self, t: Tool[Any, Any], plain: Any) -> Any:
        rt = t.return_type
        if rt is Any or rt is None or plain is None:
            return plain
        try:
            return _codec.converter.structure(plain, rt)
        except Exception:
            return plain

    async def _run(
        self,
        t: Tool[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        intent_seq: int,
        key: str,
        *,
        attempt: int,
    ) -> Any:
        """Run the tool now (its intent is durable) and log the result."""
        cell = self._cell
        attributes: dict[str, Any] = {
            ATTR.ACTOR_ID: self.actor_id,
            ATTR.SEQ: self.step_seq,
            ATTR.TOOL: t.name,
            ATTR.TOOL_EFFECT: t.effect,
            ATTR.TOOL_POLICY: t.policy,
            ATTR.IDEMPOTENCY_KEY: key,
            ATTR.ATTEMPT: attempt,
            ATTR.INTENT_SEQ: intent_seq,
            ATTR.SERVED_FROM_LOG: False,
        }
        with tracer.start_as_current_span(SPAN.TOOL_CALL, attributes=attributes) as span:
            t0 = time.perf_counter()
            extra = {"idempotency_key": key} if t.idempotent else {}
            try:
                value = await t.fn(*args, **kwargs, **extra)
                plain = _codec.to_plain(value, f"result of tool {t.name}")
                # Inside the try: a result too large to log must still settle the intent
                # (as an error), or replaying the completed step would run the tool again.
                cell.journal.write(
                    "result",
                    t.name,
                    intent_seq,
                    _records.result_payload(
                        value=plain, attempt=attempt, duration=time.perf_counter() - t0
                    ),
                )
            except Exception as exc:
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                cell.journal.write(
                    "result",
                    t.name,
                    intent_seq,
                    _records.result_payload(
                        error=_records.error_info(exc),
                        attempt=attempt,
                        duration=time.perf_counter() - t0,
                    ),
                )
                raise ToolCallError(t.name, type(exc).__qualname__, str(exc)) from exc
        return self._value(t, plain)

    def _served(self, t: Tool[Any, Any], kind: str, action: str, payload: dict[str, Any]) -> Any:
        """Return (or raise) a recorded outcome."""
        if kind == "result":
            if payload.get("ok"):
                return self._value(t, payload.get("value"))
            err = payload.get("error") or {}
            raise ToolCallError(t.name, str(err.get("type")), str(err.get("message")))
        # an operator's decision
        if action == "result":
            return self._value(t, payload.get("value"))
        err = payload.get("error") or {}
        raise ToolCallError(
            t.name,
            str(err.get("type", "OperatorFailed")),
            str(err.get("message", payload.get("reason", ""))),
        )

    async def _settle(
        self,
        t: Tool[Any, Any],
        rec: Recorded,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        arguments: dict[str, Any],
        key: str,
    ) -> Any:
        """A recorded intent: serve its outcome, or settle it by its tool's in-doubt policy."""
        # attempts so far: the original run plus each authorized retry that started
        attempts = 1 + sum(1 for k, a, _ in rec.outcomes if k == "decision" and a == "attempt")
        if rec.outcomes:
            # the outcome that settled it is the one the live step used; a later decision
            # (only a store from before the one-decision rule holds one) is ignored
            from . import _decisions

            settled = _decisions.settling(rec.outcomes)
            kind, action, payload = settled or rec.outcomes[-1]
            if settled is not None:
                with tracer.start_as_current_span(
                    SPAN.TOOL_CALL,
                    attributes={
                        ATTR.ACTOR_ID: self.actor_id,
                        ATTR.SEQ: self.step_seq,
                        ATTR.TOOL: t.name,
                        ATTR.TOOL_EFFECT: t.effect,
                        ATTR.TOOL_POLICY: t.policy,
                        ATTR.IDEMPOTENCY_KEY: key,
                        ATTR.ATTEMPT: int(payload.get("attempt") or attempts),
                        ATTR.INTENT_SEQ: rec.seq,
                        ATTR.SERVED_FROM_LOG: True,
                    },
                ):
                    return self._served(t, kind, action, payload)
            if action == "retry":
                # the operator authorized one more attempt; mark it started, then run
                _telemetry.settled(rec.seq, t.name, t.policy, "operator.retry", _by(payload))
                return await self._authorized_retry(t, rec.seq, args, kwargs, key, attempts)
            # action == "attempt" with no result: the authorized retry was interrupted too
            return await self._escalate(t, rec, args, kwargs, key, attempts)
        # in doubt: intent logged, no outcome
        self._cell.recovery_note_in_doubt(rec.seq, t.name, t.policy)
        policy = t.policy
        if policy in ("rerun", "rerun-same-key"):
            _telemetry.settled(rec.seq, t.name, policy, policy)
            return await self._run(t, args, kwargs, rec.seq, key, attempt=attempts + 1)
        if policy == "reconcile":
            assert t.reconcile is not None
            args_for = {k: v for k, v in arguments.items() if k != "idempotency_key"}
            try:
                answer = await t.reconcile(key, args_for)
            except Exception as exc:
                answer = None
                self._cell.note_event(
                    "reconcile_failed", {"intent_seq": rec.seq, "error": str(exc)}
                )
            if isinstance(answer, Happened):
                plain = _codec.to_plain(answer.result, f"reconciled result of tool {t.name}")
                self._cell.journal.write(
                    "result",
                    t.name,
                    rec.seq,
                    _records.result_payload(value=plain, attempt=attempts, settled_by="reconcile"),
                )
                _telemetry.settled(rec.seq, t.name, policy, "reconcile.happened")
                return self._value(t, plain)
            if isinstance(answer, NotHappened):
                _telemetry.settled(rec.seq, t.name, policy, "reconcile.not_happened")
                return await self._run(t, args, kwargs, rec.seq, key, attempt=attempts + 1)
        return await self._escalate(t, rec, args, kwargs, key, attempts)

    async def _authorized_retry(
        self,
        t: Tool[Any, Any],
        intent_seq: int,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        key: str,
        attempts: int,
    ) -> Any:
        """Run an operator-authorized retry: mark the attempt started (durably), then run.
        If this attempt is interrupted too, the call is in doubt again, never re-run blindly."""
        self._cell.journal.write(
            "decision",
            "attempt",
            intent_seq,
            _records.decision_payload(action="attempt", by="runtime", reason="retry authorized"),
        )
        await self._guard(self._cell.journal.flush())
        return await self._run(t, args, kwargs, intent_seq, key, attempt=attempts + 1)

    async def _escalate(
        self,
        t: Tool[Any, Any],
        rec: Recorded,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        key: str,
        attempts: int,
    ) -> Any:
        decision = await self._guard(self._cell.wait_in_doubt(rec.seq, t.name, key))
        action = decision["action"]
        _telemetry.settled(rec.seq, t.name, t.policy, f"operator.{action}", _by(decision))
        if action == "retry":
            return await self._authorized_retry(t, rec.seq, args, kwargs, key, attempts)
        return self._served(t, "decision", action, decision)


def _by(decision: dict[str, Any]) -> dict[str, str | int]:
    """Who decided an in-doubt intent, and why (span event attributes)."""
    return {
        ATTR.DECIDED_BY: str(decision.get("by", "")),
        ATTR.DECISION_REASON: str(decision.get("reason", "")),
    }
