"""Typed entry records (``actorlog._journal.records``): the payload bytes each kind is written with
(docs/FORMAT.md [F5], keys in order), and ``decode_entry`` reading them back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from actorlog._journal import codec as _codec, records as _records
from actorlog._journal.errors import CorruptEntryError
from actorlog._journal.records import (
    DecisionRecord,
    EffectRecord,
    EntryKind,
    ErrorInfo,
    IntentRecord,
    MessageRecord,
    Record,
    ResultRecord,
    StepRecord,
    decode_entry,
)
from actorlog.store import KINDS, EntryRow
from hypothesis import given, settings, strategies as st

T = 1700000000.25  # a fixed "now" for the builders


@pytest.fixture
def frozen_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("actorlog._journal.records.time.time", lambda: T)


def _row(kind: str, payload: bytes, type_tag: str = "t") -> EntryRow:
    return _codec.make_row("a1", 3, kind, type_tag, 1, None, payload)


def _bytes(p: dict[str, Any] | list[Any]) -> bytes:
    return _codec.encode_plain(p, "test payload")


def test_entry_kinds_are_the_store_kinds() -> None:
    assert tuple(EntryKind) == KINDS  # in order: the kind codes of [F4]


# [F5] Written by hand from docs/FORMAT.md: the key order is part of the checksummed bytes.
GOLDEN = [
    (
        lambda: MessageRecord({"n": 1}, "b", None, T).payload(),
        b'{"body":{"n":1},"sender":"b","trace":null,"at":1700000000.25}',
    ),
    (
        lambda: IntentRecord(0, "write", "escalate", [1], {"x": "é"}, "a:1:0", T).payload(),
        b'{"index":0,"effect":"write","policy":"escalate","args":[1],"kwargs":{"x":"\xc3\xa9"},'
        b'"key":"a:1:0","at":1700000000.25}',
    ),
    (
        lambda: ResultRecord(True, [2], None, 2, 0.5, "run", T).payload(),
        b'{"ok":true,"attempt":2,"duration":0.5,"settled_by":"run","at":1700000000.25,"value":[2]}',
    ),
    (
        lambda: ResultRecord(
            False, None, ErrorInfo("Cancelled", "m"), 1, 0.0, "cancelled", T
        ).payload(),
        b'{"ok":false,"attempt":1,"duration":0.0,"settled_by":"cancelled","at":1700000000.25,'
        b'"error":{"type":"Cancelled","message":"m"}}',
    ),
    (
        lambda: EffectRecord(1, 0.5, T).payload(),
        b'{"index":1,"value":0.5,"at":1700000000.25}',
    ),
    (
        lambda: StepRecord(True, "hi", None, {"trace_id": "t", "span_id": "s"}, 0.0, T).payload(),
        b'{"ok":true,"span":{"trace_id":"t","span_id":"s"},"duration":0.0,"at":1700000000.25,'
        b'"reply":"hi"}',
    ),
    (
        lambda: StepRecord(False, None, ErrorInfo("ValueError", "bad"), None, 0.0, T).payload(),
        b'{"ok":false,"span":null,"duration":0.0,"at":1700000000.25,'
        b'"error":{"type":"ValueError","message":"bad"}}',
    ),
    (
        lambda: _records.decision_payload(action="result", value=3, by="op", reason="r"),
        b'{"action":"result","by":"op","reason":"r","at":1700000000.25,"value":3}',
    ),
    (
        lambda: _records.decision_payload(
            action="fail", error={"type": "OperatorFailed", "message": "no"}, by="op", reason="r"
        ),
        b'{"action":"fail","by":"op","reason":"r","at":1700000000.25,'
        b'"error":{"type":"OperatorFailed","message":"no"}}',
    ),
    (
        lambda: _records.decision_payload(action="attempt", by="runtime", reason="x"),
        b'{"action":"attempt","by":"runtime","reason":"x","at":1700000000.25}',
    ),
]


@pytest.mark.usefixtures("frozen_time")
@pytest.mark.parametrize(("build", "golden"), GOLDEN)
def test_records_write_the_documented_format_1_bytes(build: Any, golden: bytes) -> None:
    """[F5] a record's JSON object: what format 1 wrote for every kind, and format 2 writes
    for decisions (the builders of the other kinds write [F19]'s compact form:
    tests/journal/test_compact.py)."""
    assert _bytes(build()) == golden


# -- round trip ------------------------------------------------------------------------------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_text = st.text(max_size=10)
_at = st.none() | st.floats(allow_nan=False, allow_infinity=False)
_dur = st.none() | st.floats(min_value=0, max_value=1e6)
_strings = st.none() | st.dictionaries(_text, _text, max_size=2)
_error = st.builds(ErrorInfo, _text, _text)
_index = st.integers(0, 10_000)


@st.composite
def _result(draw: st.DrawFn) -> ResultRecord:
    ok = draw(st.booleans())
    return ResultRecord(
        ok=ok,
        value=draw(_json) if ok else None,
        error=None if ok else draw(st.none() | _error),
        attempt=draw(st.integers(1, 9)),
        duration=draw(_dur),
        settled_by=draw(st.sampled_from(["run", "reconcile", "cancelled"])),
        at=draw(_at),
    )


@st.composite
def _step(draw: st.DrawFn) -> StepRecord:
    ok = draw(st.booleans())
    return StepRecord(
        ok=ok,
        reply=draw(_json) if ok else None,
        error=None if ok else draw(st.none() | _error),
        span=draw(_strings),
        duration=draw(_dur),
        at=draw(_at),
    )


@st.composite
def _decision(draw: st.DrawFn) -> DecisionRecord:
    action = draw(st.sampled_from(["result", "retry", "fail", "attempt"]))
    return DecisionRecord(
        action=action,
        value=draw(_json) if action == "result" else None,
        error=draw(st.none() | _error) if action == "fail" else None,
        by=draw(_text),
        reason=draw(_text),
        at=draw(_at),
    )


RECORDS: st.SearchStrategy[Record] = st.one_of(
    st.builds(MessageRecord, _json, st.none() | _text, _strings, _at),
    st.builds(
        IntentRecord,
        _index,
        _text,
        _text,
        st.lists(_json, max_size=3),
        st.dictionaries(_text, _json, max_size=3),
        _text,
        _at,
    ),
    _result(),
    st.builds(EffectRecord, _index, _json, _at),
    _step(),
    _decision(),
)


@given(RECORDS)
def test_every_record_round_trips_through_its_entry(rec: Record) -> None:
    tag = rec.action if isinstance(rec, DecisionRecord) else "some.Tag"
    row = _row(rec.KIND, _bytes(rec.payload()), tag)
    _codec.verify_row(row, "a1", 3)
    assert decode_entry(row) == rec


@pytest.mark.usefixtures("frozen_time")
def test_builders_build_the_record_stamped_now() -> None:
    p = _records.step_payload(error=ErrorInfo.of(ValueError("x")), duration=1.5)
    assert decode_entry(_row("step", _bytes(p))) == StepRecord(
        ok=False, error=ErrorInfo("ValueError", "x"), duration=1.5, at=T
    )
    assert _records.error_info(KeyError("k")) == {"type": "KeyError", "message": "'k'"}


# -- what decoding accepts and refuses --------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "payload", "expected"),
    [
        ("message", {}, MessageRecord()),
        ("message", {"x": 1}, MessageRecord()),  # unknown keys are ignored
        ("intent", {"index": 2}, IntentRecord(index=2)),
        ("result", {"ok": True, "value": 1}, ResultRecord(ok=True, value=1)),
        ("result", {"ok": False}, ResultRecord(ok=False)),
        ("effect", {"index": 0, "at": 5}, EffectRecord(index=0, at=5.0)),
        ("step", {"ok": True}, StepRecord(ok=True)),
        ("decision", {}, DecisionRecord(action="t")),  # the action is the type tag
        ("decision", {"action": "t", "error": {}}, DecisionRecord("t", error=ErrorInfo("", ""))),
    ],
)
def test_missing_fields_take_their_defaults(kind: str, payload: Any, expected: Record) -> None:
    assert decode_entry(_row(kind, json.dumps(payload).encode())) == expected


@pytest.mark.parametrize(
    ("kind", "payload", "why"),
    [
        ("message", b"[1]", "1 items, a message payload has 2 to 5"),
        ("message", b'"x"', "payload is not a JSON object"),
        ("message", b"{", "Expecting"),
        ("message", b'{"sender": 1}', "field 'sender' is not a string or null"),
        ("message", b'{"trace": {"traceparent": 1}}', "not an object of strings"),
        ("message", b'{"at": "noon"}', "field 'at' is not a number or null"),
        ("message", b'{"at": true}', "field 'at' is not a number or null"),
        ("intent", b"{}", "field 'index' is missing"),
        ("intent", b'{"index": true}', "field 'index' is not an integer"),
        ("intent", b'{"index": 1.0}', "field 'index' is not an integer"),
        ("intent", b'{"index": 0, "args": {}}', "field 'args' is not a list"),
        ("intent", b'{"index": 0, "kwargs": []}', "field 'kwargs' is not an object"),
        ("intent", b'{"index": 0, "key": null}', "field 'key' is not a string"),
        ("result", b"{}", "field 'ok' is missing"),
        ("result", b'{"ok": 1}', "field 'ok' is not true or false"),
        ("result", b'{"ok": false, "error": "x"}', "field 'error' is not a JSON object"),
        ("result", b'{"ok": false, "error": {"type": 1}}', "field 'type' is not a string"),
        ("result", b'{"ok": true, "attempt": "2"}', "field 'attempt' is not an integer"),
        ("result", b'{"ok": true, "settled_by": 0}', "field 'settled_by' is not a string"),
        ("effect", b'{"index": "0"}', "field 'index' is not an integer"),
        ("step", b'{"ok": true, "span": []}', "field 'span' is not an object or null"),
        ("step", b'{"ok": true, "duration": "1s"}', "field 'duration' is not a number"),
        ("decision", b'{"action": "retry"}', "action 'retry' is not its type tag 't'"),
        ("decision", b'{"by": null}', "field 'by' is not a string"),
    ],
)
def test_a_field_of_the_wrong_type_is_damage(kind: str, payload: bytes, why: str) -> None:
    with pytest.raises(CorruptEntryError) as info:
        decode_entry(_row(kind, payload))
    assert (info.value.actor_id, info.value.seq, info.value.check) == ("a1", 3, "decode")
    assert why in info.value.detail


def test_an_unknown_kind_is_damage() -> None:
    """[F7] a kind outside table 3.1 makes the entry invalid: no generic record for one."""
    row = EntryRow("a1", 3, "note", "t", 0, None, b"{}", 0)
    with pytest.raises(CorruptEntryError, match="unknown kind 'note'"):
        decode_entry(row)


def test_outcomes_and_recorded() -> None:
    result = _records.Outcome(ResultRecord(ok=True, value=1), "tool")
    retry = _records.Outcome(DecisionRecord("retry"), "retry")
    assert (result.kind, result.settles) == (EntryKind.RESULT, True)
    assert (retry.kind, retry.settles) == (EntryKind.DECISION, False)
    assert _records.Outcome(DecisionRecord("fail"), "fail").settles
    intent = IntentRecord(index=0, policy="escalate")
    r = _records.Recorded(EntryKind.INTENT, 5, "tool", intent, [retry])
    assert r.record is intent and r.outcomes[0].tag == "retry"


# -- the builders write what the records would ----------------------------------------------

_err = st.none() | st.builds(ErrorInfo, _text, _text)


@given(
    value=_json,
    error=_err,
    attempt=st.integers(1, 9),
    duration=st.floats(min_value=0, max_value=1e6),
    settled_by=st.sampled_from(["run", "reconcile", "cancelled"]),
)
def test_result_builder_writes_the_records_payload(
    value: Any, error: ErrorInfo | None, attempt: int, duration: float, settled_by: str
) -> None:
    """The hot-path builders write compact payloads ([F19]) directly; they read back as the
    record (its duration in whole microseconds)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("actorlog._journal.records.time.time", lambda: T)
        built = _records.result_payload(
            value=value, error=error, attempt=attempt, duration=duration, settled_by=settled_by
        )
    us = round(duration * 1_000_000) / 1_000_000
    rec = ResultRecord(error is None, None if error else value, error, attempt, us, settled_by, T)
    assert decode_entry(_row("result", _bytes(built))) == rec


@given(reply=_json, error=_err, duration=st.floats(min_value=0, max_value=1e6))
def test_step_builder_writes_the_records_payload(
    reply: Any, error: ErrorInfo | None, duration: float
) -> None:
    span = {"trace_id": "t", "span_id": "s"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("actorlog._journal.records.time.time", lambda: T)
        built = _records.step_payload(reply=reply, error=error, span=span, duration=duration)
    us = round(duration * 1_000_000) / 1_000_000
    rec = StepRecord(error is None, None if error else reply, error, span, us, T)
    assert decode_entry(_row("step", _bytes(built))) == rec


@given(body=_json, sender=st.none() | _text, index=st.integers(0, 9), args=st.lists(_json))
def test_message_intent_effect_builders_write_the_records_payload(
    body: Any, sender: str | None, index: int, args: list[Any]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("actorlog._journal.records.time.time", lambda: T)
        message = _records.message_payload(body, sender=sender, trace=None)
        intent = _records.intent_payload(
            index=index, effect="write", policy="escalate", args=args, kwargs={"k": 1}, key="k"
        )
        effect = _records.effect_payload(index=index, value=body)
    assert decode_entry(_row("message", _bytes(message))) == MessageRecord(body, sender, None, T)
    assert decode_entry(_row("intent", _bytes(intent))) == IntentRecord(
        index, "write", "escalate", args, {"k": 1}, "k", T
    )
    assert decode_entry(_row("effect", _bytes(effect))) == EffectRecord(index, body, T)


# -- the compact form's direct read is the general read -------------------------------------

_item = st.one_of(
    st.integers(-2, 5),
    st.integers(2**40, 2**41),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "x", "run", "write", "0", "0.1", "1.x", "\u0661"]),  # a digit, not ASCII
    st.lists(_json, max_size=2),
    st.dictionaries(_text, _text | st.integers(), max_size=2),
)
_int_or_none = st.none() | st.integers(0, 2**41)
_task = st.sampled_from(["", "0", "1.2", "3.x", "²"])
#: kind -> what the runtime writes at each position of its compact form ([F19])
_positions: dict[str, list[st.SearchStrategy[Any]]] = {
    "message": [_json, _int_or_none, st.none() | _text, st.none() | _text, _strings],
    "intent": [
        _index,
        st.integers(-1, 2) | st.sampled_from(["", "read", "other"]),
        st.integers(-1, 4) | st.sampled_from(["", "rerun", "other"]),
        st.lists(_json, max_size=2),
        _text,
        _int_or_none,
        st.dictionaries(_text, _json, max_size=2),
        _task,
    ],
    "result": [
        st.just(True) | st.booleans(),
        _json,
        _int_or_none,
        _int_or_none,
        st.integers(0, 3),
        st.integers(-1, 3) | st.sampled_from(["", "run", "other"]),
        st.booleans(),
        st.none() | _text,
        _json,
    ],
    "effect": [_index, _json, _int_or_none, _task],
    "step": [st.just(True) | st.booleans(), _json, _int_or_none, _int_or_none, _strings],
}


@st.composite
def _compact_payload(draw: st.DrawFn) -> tuple[str, list[Any]]:
    """A compact payload ([F19]) of one of the five kinds, of any length: each item what
    the runtime writes there, but for at most one item of any type."""
    kind = draw(st.sampled_from(sorted(_positions)))
    spots = _positions[kind]
    n = draw(st.sampled_from(range(len(spots) + 2)))
    odd = draw(st.sampled_from(range(-1, n)))  # -1: none
    return kind, [draw(_item if i == odd or i >= len(spots) else spots[i]) for i in range(n)]


def _general_read(row: EntryRow) -> Record:
    """``decode_entry``'s general way: the compact array as its dict, read by ``Fields``."""
    from actorlog._journal import compact as _compact
    from actorlog._journal.fields import FieldError, Fields, as_object

    try:
        obj = _compact.to_object(row.kind, _codec.decode_json(row.payload))
        rec: Record = _records._CLASSES[row.kind]._parse(Fields(as_object(obj, "p")), "t")
    except (FieldError, _compact.LayoutError) as exc:
        raise CorruptEntryError(row.actor_id, row.seq, "decode", str(exc)) from None
    return rec


@settings(max_examples=1000)
@given(_compact_payload())
def test_the_compact_forms_direct_read_is_the_general_read(case: tuple[str, list[Any]]) -> None:
    """``decode_entry`` reads the runtime's compact payloads without the dict of their
    fields: the same record, or the same damage, as the general way for any array."""
    kind, items = case
    row = _row(kind, _bytes(items))
    try:
        expected: Record | str = _general_read(row)
    except CorruptEntryError as exc:
        expected = exc.detail
    try:
        got: Record | str = decode_entry(row)
    except CorruptEntryError as exc:
        got = exc.detail
    assert got == expected
    assert type(got) is type(expected)


# -- the internal value classes written without attrs (``_fields.Value``) -------------------


def test_value_classes_compare_show_and_freeze_by_their_declared_fields() -> None:
    """What attrs gave them: equality by fields (same class only), a repr in declared
    order, ``__match_args__``; a ``FrozenValue`` refuses changes and hashes its fields."""
    import attrs
    from actorlog._durability.attempts import Settled
    from actorlog._durability.plan import PendingMessage

    m = PendingMessage(3, "id", "t.Msg", {"x": 1}, None, None)
    assert m == PendingMessage(3, "id", "t.Msg", {"x": 1}, None, None, [], None, None)
    assert m != PendingMessage(3, "id", "t.Msg", {"x": 2}, None, None)
    other = PendingMessage(1, None, "t", 0, None, None)
    assert m.recorded == [] and m.recorded is not other.recorded
    assert PendingMessage.__match_args__[:3] == ("seq", "message_id", "type_tag")
    assert repr(m).startswith("PendingMessage(seq=3, message_id='id', type_tag='t.Msg', body=")
    with pytest.raises(TypeError):
        hash(m)
    s = Settled([1])
    assert s == Settled([1]) and s != m and Settled(1) != 1
    assert hash(Settled(2)) == hash(Settled(2))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        s.value = 2
    with pytest.raises(AttributeError):
        m.other = 1  # type: ignore[attr-defined]  # slots


def test_a_value_class_whose_slots_are_not_its_fields_is_refused() -> None:
    from actorlog._journal.fields import Value

    with pytest.raises(TypeError, match="__slots__ is not its declared fields"):

        class Bad(Value):
            __slots__ = ("a",)
            a: int
            b: int
