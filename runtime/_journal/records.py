"""The payload of each entry kind (FORMAT.md [F5]) as a typed record, read and written here.

Reading: :func:`decode_entry` turns a *verified* row (``_codec.verify_row``) into the record
class of its kind, type-checking the fields the runtime relies on::

    rec = decode_entry(row)          # raises CorruptEntryError(actor, seq, "decode", why)
    match rec:
        case StepRecord(ok=True, reply=reply): ...
        case StepRecord(error=err): ...  # err: ErrorInfo | None

    ==========  =======================================================================
    kind        record (fields; a missing field takes the default after ``=``)
    ==========  =======================================================================
    message     MessageRecord(body=None, sender=None, trace=None, at=None)
    intent      IntentRecord(index, effect="", policy="", args=[], kwargs={}, key="", at,
                task="")
    result      ResultRecord(ok, value=None, error=None, attempt=1, duration=None,
                settled_by="run", at)
    effect      EffectRecord(index, value=None, at, task="")
    step        StepRecord(ok, reply=None, error=None, span=None, duration=None, at)
    decision    DecisionRecord(action=<type tag>, value=None, error=None, by="", reason="",
                at, attempt=0, delay=0.0, in_doubt=False)
    ==========  =======================================================================

``index`` and ``ok`` have no default (every writer since format 1 wrote them, and recovery
cannot do without them); ``at`` defaults to None; errors are :class:`ErrorInfo`. Kinds,
event kinds, decision actions and ``settled_by`` values are the ``StrEnum`` classes of
:mod:`._entrykinds`, re-exported here.

Writing: ``rec.payload()`` is the JSON object of a record, keys in the order of [F5] (the
order is part of the checksummed bytes; format 2 writes it for ``decision`` entries). The
``*_payload`` functions build the payload of a new entry, stamped ``at`` now, in format 2's
compact form ([F19], :mod:`._compact`) for every kind but ``decision``: ``step_payload(
reply=r)`` is ``[True, r, <now in ms>, 0]``, which reads as ``StepRecord(ok=True, reply=r,
duration=0.0, at=<now>)``.

:class:`Recorded` is one effect recorded for a step (an intent with its :class:`Outcome`
list, or a plain effect), as recovery hands it to the replaying ``Context``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

import attrs

from ..store import EntryRow
from . import codec as _codec, compact as _compact
from .entrykinds import DecisionAction, EntryKind, EventKind, SettledBy
from .entryreads import LoggedField, logged, saved_options
from .errors import CorruptEntryError
from .fields import REQUIRED, FieldError, Fields, as_object

__all__ = [
    "attempt_failed_payload",
    "DecisionAction",
    "DecisionRecord",
    "EffectRecord",
    "EntryKind",
    "ErrorInfo",
    "EventKind",
    "IntentRecord",
    "MessageRecord",
    "Outcome",
    "Record",
    "Recorded",
    "ResultRecord",
    "SettledBy",
    "StepRecord",
    "decision_payload",
    "decode_entry",
    "effect_payload",
    "error_info",
    "intent_payload",
    "loggable_text",
    "message_payload",
    "result_payload",
    "LoggedField",
    "logged",
    "saved_options",
    "step_payload",
]


#: [F5] Longest error message (in characters) an entry keeps; a longer one is cut, with a
#: marker saying how long it was.
MAX_ERROR_CHARS = 16 * 1024
_MAX_ERROR_TYPE_CHARS = 256


def loggable_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` as it can always be logged: lone surrogates (a body decoded with
    ``surrogateescape``, say) written as ``\\udcff`` escapes, and cut to ``limit``
    characters with a marker naming the full length."""
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode()
    if len(text) > limit:
        text = f"{text[:limit]}... [truncated: {len(text)} characters in all]"
    return text


@attrs.frozen
class ErrorInfo:
    """[F5] An error as an entry records it: its type's qualified name and its message."""

    type: str
    message: str

    @classmethod
    def of(cls, exc: BaseException) -> ErrorInfo:
        """``exc`` as an entry records it, always loggable (see :func:`loggable_text`), also
        when ``str(exc)`` raises."""
        try:
            message = str(exc)
        except Exception as broken:  # a broken __str__ must not leave the outcome unlogged
            message = f"<str() of the error raised {type(broken).__qualname__}>"
        return cls(
            type=loggable_text(type(exc).__qualname__, _MAX_ERROR_TYPE_CHARS),
            message=loggable_text(message),
        )

    @classmethod
    def from_plain(cls, obj: object, what: str = "error") -> ErrorInfo:
        """Parse ``{"type": ..., "message": ...}`` (a missing key is ``""``). Raises
        ``ValueError`` (not an object, or a value that is not a string)."""
        f = Fields(as_object(obj, what))
        try:
            return cls(type=f.text("type", ""), message=f.text("message", ""))
        except FieldError as exc:
            raise FieldError(f"{what}: {exc}") from None

    def payload(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message}


def _error(f: Fields, name: str) -> ErrorInfo | None:
    v = f.value(name)
    return None if v is None else ErrorInfo.from_plain(v, f"field {name!r}")


def _error_of(error: ErrorInfo | Mapping[str, str] | None) -> ErrorInfo | None:
    """An error given to a builder as a record or (by the core today) as its dict."""
    if error is None or isinstance(error, ErrorInfo):
        return error
    return ErrorInfo(type=str(error["type"]), message=str(error["message"]))


def _plain_error(error: ErrorInfo | None) -> dict[str, str] | None:
    return None if error is None else error.payload()


@attrs.frozen
class MessageRecord:
    """``message`` (type_tag = message class tag, ref = 0)."""

    KIND: ClassVar[EntryKind] = EntryKind.MESSAGE
    #: the message, cattrs-unstructured
    body: Any = None
    #: the sending actor's id, or None
    sender: str | None = None
    #: the sender's W3C trace context (traceparent, tracestate)
    trace: dict[str, str] | None = None
    at: float | None = None
    #: [F13] the incarnation id of the log this message was written into (None: a message
    #: logged before incarnations existed; its step keeps the old key format)
    incarnation: str | None = None

    def payload(self) -> dict[str, Any]:
        p = {"body": self.body, "sender": self.sender, "trace": self.trace, "at": self.at}
        if self.incarnation is not None:
            p["incarnation"] = self.incarnation
        return p

    @classmethod
    def _parse(cls, f: Fields, type_tag: str) -> MessageRecord:
        return cls(
            f.value("body"),
            f.opt_text("sender"),
            f.opt_strings("trace"),
            f.opt_float("at"),
            f.opt_text("incarnation"),
        )


@attrs.frozen
class IntentRecord:
    """``intent`` (type_tag = tool name, ref = the step's message seq)."""

    KIND: ClassVar[EntryKind] = EntryKind.INTENT
    #: position among the effects of its task (intents and effects share one counter from 0)
    index: int
    effect: str = ""  # read | write
    policy: str = ""  # rerun | rerun-same-key | reconcile | escalate
    args: list[Any] = attrs.Factory(list)
    kwargs: dict[str, Any] = attrs.Factory(dict)
    #: [F13] the idempotency key the call ran with
    key: str = ""
    at: float | None = None
    #: [F18] the step task that made it ("" for the handler's own task; absent then)
    task: str = ""

    def payload(self) -> dict[str, Any]:
        return {
            "index": self.index,
            **({"task": self.task} if self.task else {}),
            "effect": self.effect,
            "policy": self.policy,
            "args": self.args,
            "kwargs": self.kwargs,
            "key": self.key,
            "at": self.at,
        }

    @classmethod
    def _parse(cls, f: Fields, type_tag: str) -> IntentRecord:
        return cls(
            index=f.integer("index", REQUIRED),
            effect=f.text("effect", ""),
            policy=f.text("policy", ""),
            args=f.items("args"),
            kwargs=f.mapping("kwargs"),
            key=f.text("key", ""),
            at=f.opt_float("at"),
            task=f.task_path(),
        )


@attrs.frozen
class ResultRecord:
    """``result`` (type_tag = tool name, ref = intent seq): ``value`` if ``ok``, else
    ``error``. ``settled_by``: see :class:`SettledBy`."""

    KIND: ClassVar[EntryKind] = EntryKind.RESULT
    ok: bool
    value: Any = None
    error: ErrorInfo | None = None
    #: 1 for the first run, +1 for each authorized retry
    attempt: int = 1
    duration: float | None = None
    settled_by: str = SettledBy.RUN.value
    at: float | None = None
    in_doubt: bool = False  # [F18] a cancelled write whose policy escalates
    reconciled: str | None = None  # [F18] a cancelled write's reconcile answer
    reconciled_value: Any = None  # [F18] its result (``reconciled == "happened"``)

    def payload(self) -> dict[str, Any]:
        p: dict[str, Any] = {
            "ok": self.ok,
            "attempt": self.attempt,
            "duration": self.duration,
            "settled_by": self.settled_by,
            "at": self.at,
        }
        if self.ok:
            p["value"] = self.value
        else:
            p["error"] = _plain_error(self.error)
        return {**p, **doubt_keys(self.in_doubt, self.reconciled, self.reconciled_value)}

    @classmethod
    def _parse(cls, f: Fields, type_tag: str) -> ResultRecord:
        return cls(
            ok=f.boolean("ok", REQUIRED),
            value=f.value("value"),
            error=_error(f, "error"),
            attempt=f.integer("attempt", 1),
            duration=f.opt_float("duration"),
            settled_by=f.text("settled_by", SettledBy.RUN.value),
            at=f.opt_float("at"),
            in_doubt=f.boolean("in_doubt", False),
            reconciled=f.opt_text("reconciled"),
            reconciled_value=f.value("reconciled_value"),
        )


@attrs.frozen
class EffectRecord:
    """``effect`` (type_tag = now|random|uuid|send|spawn|send.failed|spawn.failed, ref = the
    step's message seq). ``value``: see [F5] (an error object for the ``.failed`` tags)."""

    KIND: ClassVar[EntryKind] = EntryKind.EFFECT
    index: int
    value: Any = None
    at: float | None = None
    #: [F18] the step task that made it ("" for the handler's own task; absent then)
    task: str = ""

    def payload(self) -> dict[str, Any]:
        p: dict[str, Any] = {"index": self.index, "task": self.task} if self.task else {}
        return {"index": self.index, **p, "value": self.value, "at": self.at}

    @classmethod
    def _parse(cls, f: Fields, type_tag: str) -> EffectRecord:
        return cls(
            index=f.integer("index", REQUIRED),
            value=f.value("value"),
            at=f.opt_float("at"),
            task=f.task_path(),
        )


@attrs.frozen
class StepRecord:
    """``step`` (type_tag = message class tag, ref = message seq): ``reply`` if ``ok``, else
    ``error``. ``span``: the live step's trace_id and span_id (for replay links), or None."""

    KIND: ClassVar[EntryKind] = EntryKind.STEP
    ok: bool
    reply: Any = None
    error: ErrorInfo | None = None
    span: dict[str, str] | None = None
    duration: float | None = None
    at: float | None = None

    def payload(self) -> dict[str, Any]:
        p: dict[str, Any] = {
            "ok": self.ok,
            "span": self.span,
            "duration": self.duration,
            "at": self.at,
        }
        if self.ok:
            p["reply"] = self.reply
        else:
            p["error"] = _plain_error(self.error)
        return p

    @classmethod
    def _parse(cls, f: Fields, type_tag: str) -> StepRecord:
        return cls(
            ok=f.boolean("ok", REQUIRED),
            reply=f.value("reply"),
            error=_error(f, "error"),
            span=f.opt_strings("span"),
            duration=f.opt_float("duration"),
            at=f.opt_float("at"),
        )


@attrs.frozen
class DecisionRecord:
    """``decision`` (type_tag = ``action``, ref = intent seq): an operator's ruling, or the
    runtime's ``attempt`` marker. ``value`` for action ``result``, ``error`` for ``fail``."""

    KIND: ClassVar[EntryKind] = EntryKind.DECISION
    action: str  # see DecisionAction
    value: Any = None
    error: ErrorInfo | None = None
    by: str = ""
    reason: str = ""
    at: float | None = None
    #: ``attempt_failed`` only: the attempt that failed, the back-off chosen before the next
    #: one (seconds from ``at``), and whether that attempt is in doubt (a write that timed
    #: out: its in-doubt policy runs before the next attempt)
    attempt: int = 0
    delay: float = 0.0
    in_doubt: bool = False

    @property
    def settles(self) -> bool:
        """Does this decision settle its intent (``result`` or ``fail``)?"""
        return self.action in (DecisionAction.RESULT, DecisionAction.FAIL)

    def payload(self) -> dict[str, Any]:
        if self.action == DecisionAction.ATTEMPT_FAILED:
            return {
                "action": self.action,
                "attempt": self.attempt,
                "error": _plain_error(self.error),
                "delay": self.delay,
                "in_doubt": self.in_doubt,
                "by": self.by,
                "reason": self.reason,
                "at": self.at,
            }
        p: dict[str, Any] = {
            "action": self.action,
            "by": self.by,
            "reason": self.reason,
            "at": self.at,
        }
        if self.action == DecisionAction.RESULT:
            p["value"] = self.value
        if self.action == DecisionAction.FAIL:
            p["error"] = _plain_error(self.error)
        return p

    @classmethod
    def _parse(cls, f: Fields, type_tag: str) -> DecisionRecord:
        action = f.text("action", type_tag)
        if action != type_tag:
            raise FieldError(f"action {action!r} is not its type tag {type_tag!r}")
        return cls(
            action=action,
            value=f.value("value"),
            error=_error(f, "error"),
            by=f.text("by", ""),
            reason=f.text("reason", ""),
            at=f.opt_float("at"),
            attempt=f.integer("attempt", 0),
            delay=f.opt_float("delay") or 0.0,
            in_doubt=f.boolean("in_doubt", False),
        )


#: Any entry's record.
Record: TypeAlias = (
    MessageRecord | IntentRecord | ResultRecord | EffectRecord | StepRecord | DecisionRecord
)

_CLASSES: dict[str, Any] = {
    cls.KIND: cls
    for cls in (MessageRecord, IntentRecord, ResultRecord, EffectRecord, StepRecord, DecisionRecord)
}


def decode_entry(row: EntryRow) -> Record:
    """The record of a verified row (``_codec.verify_row`` has checked its kind).

    Raises:
        CorruptEntryError: check ``decode``: the payload is not JSON, not an object, has a
            field of the wrong type or misses ``index``/``ok``; or the kind is unknown (a row
            that was not verified: [F7] makes an unknown kind damage, so there is no generic
            record for one).
    """
    cls = _CLASSES.get(row.kind)
    try:
        if cls is None:
            raise FieldError(f"unknown kind {row.kind!r}")
        try:
            obj = _codec.decode_json(row.payload)
        except (ValueError, UnicodeDecodeError) as exc:
            raise FieldError(str(exc)) from None
        if type(obj) is list:  # [F19] format 2's compact form
            if (args := _compact.record_args(row.kind, obj)) is not None:
                return cls(*args)  # type: ignore[no-any-return]  # the runtime's own, read directly
            obj = _compact.to_object(row.kind, obj)
        rec: Record = cls._parse(Fields(as_object(obj, "payload")), row.type_tag)
    except (FieldError, _compact.LayoutError) as exc:
        raise CorruptEntryError(row.actor_id, row.seq, "decode", str(exc)) from None
    return rec


@attrs.frozen
class Outcome:
    """A ``result`` or ``decision`` that refers to an intent, in log order.

    ``tag`` is the entry's type tag (the tool name of a result, the action of a decision)."""

    record: ResultRecord | DecisionRecord
    tag: str
    #: the entry's seq (0 when not read from a log): the order outcomes were logged in
    seq: int = 0

    @property
    def kind(self) -> EntryKind:
        return self.record.KIND

    @property
    def settles(self) -> bool:
        """A result, or a ``result``/``fail`` decision: what the live step used."""
        return isinstance(self.record, ResultRecord) or self.record.settles


@attrs.define
class Recorded:
    """One effect recorded for a step: an intent (with what settled it) or a plain effect."""

    kind: EntryKind  # INTENT | EFFECT
    seq: int
    type_tag: str
    record: IntentRecord | EffectRecord
    #: for intents: the results and decisions that refer to it, in log order
    outcomes: list[Outcome] = attrs.Factory(list)


# -- builders: the payload of a new entry, stamped now -----------------------------------------


def error_info(exc: BaseException) -> dict[str, str]:
    """[F5] ``ErrorInfo.of(exc).payload()``: an error as a step or result records it."""
    return ErrorInfo.of(exc).payload()


def message_payload(
    body: Any,
    *,
    sender: str | None,
    trace: dict[str, str] | None,
    incarnation: str | None = None,
) -> list[Any]:
    """``message``: the unstructured message, who sent it, the sender's W3C trace context,
    and the incarnation id of the log it goes into ([F13]).

    The builders write the compact payload ([F19]) of ``XRecord(...)`` directly (they run
    for every entry; tests/journal/test_records.py holds them equal)."""
    a = [body, round(time.time() * 1000), incarnation, sender, trace]
    while len(a) > 2 and a[-1] is None:
        a.pop()
    return a


def intent_payload(
    *,
    index: int,
    task: str = "",
    effect: str,
    policy: str,
    args: list[Any],
    kwargs: dict[str, Any],
    key: str,
) -> list[Any]:
    """``intent`` (type_tag = tool name, ref = step's message seq); ``task`` ([F18]) only
    for an effect of a task the handler spawned."""
    e, p = _compact.EFFECT_CODE.get(effect, effect), _compact.POLICY_CODE.get(policy, policy)
    a: list[Any] = [index, e, p, args, key, round(time.time() * 1000)]
    if task:
        a += (kwargs, task)
    elif kwargs:
        a.append(kwargs)
    return a


def result_payload(
    *,
    value: Any = None,
    error: ErrorInfo | Mapping[str, str] | None = None,
    attempt: int = 1,
    duration: float = 0.0,
    settled_by: str = SettledBy.RUN.value,
    doubt: Mapping[str, Any] | None = None,
) -> list[Any]:
    """``result`` (type_tag = tool name, ref = intent seq); ``ok`` unless ``error``.

    ``settled_by`` is ``run`` (the tool ran), ``reconcile`` (its reconcile fn answered), or
    ``cancelled`` (the handler's own cancel scope cancelled the call and the step went on).
    ``doubt``: a cancelled write's in-doubt keys (:func:`doubt_keys`).
    """
    ok = error is None
    if ok and type(attempt) is int and attempt == 1 and settled_by == "run" and not doubt:
        return [True, value, round(time.time() * 1000), round(duration * 1_000_000)]
    a = [
        ok,
        value if ok else _plain_error(_error_of(error)),
        round(time.time() * 1000),
        round(duration * 1_000_000),
        attempt,
        _compact.SETTLED_CODE.get(settled_by, str(settled_by)),
    ]
    if doubt:
        a += (doubt.get("in_doubt", False), doubt.get("reconciled"), doubt.get("reconciled_value"))
    return _compact.trim_result(a)


def doubt_keys(in_doubt: bool, reconciled: str | None, value: Any = None) -> dict[str, Any]:
    """[F18] A write cancelled while it ran: its in-doubt policy's outcome, as result keys."""
    if reconciled == "happened":
        return {"reconciled": reconciled, "reconciled_value": value}
    return {"reconciled": reconciled} if reconciled else {"in_doubt": True} if in_doubt else {}


def effect_payload(*, index: int, value: Any, task: str = "") -> list[Any]:
    """``effect`` (type_tag = now|random|uuid|send|spawn, ref = step's message seq)."""
    return [index, value, _compact.now_ms(), task] if task else [index, value, _compact.now_ms()]


def step_payload(
    *,
    reply: Any = None,
    error: ErrorInfo | Mapping[str, str] | None = None,
    span: dict[str, str] | None = None,
    duration: float = 0.0,
) -> list[Any]:
    """``step`` (type_tag = message type tag, ref = message seq); ``ok`` unless ``error``."""
    ok = error is None
    a = [
        ok,
        reply if ok else _plain_error(_error_of(error)),
        round(time.time() * 1000),
        round(duration * 1_000_000),
    ]
    if span is not None:
        a.append(span)
    return a


def decision_payload(
    *,
    action: str,
    value: Any = None,
    error: ErrorInfo | Mapping[str, str] | None = None,
    by: str,
    reason: str,
) -> dict[str, Any]:
    """``decision`` (type_tag = result|retry|fail|attempt, ref = intent seq)."""
    return DecisionRecord(str(action), value, _error_of(error), by, reason, time.time()).payload()


def attempt_failed_payload(
    *, attempt: int, error: ErrorInfo, delay: float, in_doubt: bool, reason: str
) -> dict[str, Any]:
    """``decision`` ``attempt_failed`` (ref = intent seq): attempt number ``attempt`` failed
    with ``error``; the next one starts ``delay`` seconds after ``at``."""
    return DecisionRecord(
        DecisionAction.ATTEMPT_FAILED.value,
        error=error,
        by="runtime",
        reason=reason,
        at=time.time(),
        attempt=attempt,
        delay=delay,
        in_doubt=in_doubt,
    ).payload()


#: the fields of its own new entries the runtime reads back (live equals replay)
