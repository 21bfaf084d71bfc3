"""Format 4's reads unpack by splicing stored text (docs/FORMAT.md [F21]): for any ask, what
is packed reads back as it was written (as a format-3 file reads it), the splicing gives
what decoding the anchors gives (``unpack``), and every flipped bit of a packed entry
changes its payload. Arbitrary JSON in every item, spelled as this encoder writes it and
otherwise."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from actorlog._journal.codec import make_row, verify_row
from actorlog.errors import CorruptEntryError
from actorlog.store import EntryRow
from actorlog.stores import SqliteStore, _sqlite_pack
from actorlog.stores._sqlite_pack import anchor, is_packed, pack_rows, unpack
from actorlog.stores._sqlite_unpack import unpack_rows
from hypothesis import HealthCheck, given, settings, strategies as st

from tests._sqlitefile import log_seq
from tests.stores.test_sqlite_format4 import (
    INC,
    INTENT,
    MESSAGE,
    RESULT,
    STEP,
    _ask,
    _stored,
    _write,
)

_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=6)
#: texts made to hit the splicing's edges: quotes, backslashes, control characters
_edgy = st.sampled_from(["", "x", 'a"b', "a\\b", "\n", "\x1f", "é", "\u2028", "0", "-"])
_int = st.one_of(st.integers(-3, 3), st.integers(-(2**70), 2**70))
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), _int, st.floats(allow_nan=False), _text, _edgy),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.one_of(_text, _edgy), inner, max_size=3)
    ),
    max_leaves=6,
)

#: how a payload is spelled: this encoder's text, or another one a reader also takes
_SPELLINGS = [
    lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False),
    lambda v: json.dumps(v, ensure_ascii=False),
    lambda v: json.dumps(v, separators=(",", ":")),
]


def _bytes(value: list[Any], spelling: int) -> bytes:
    return _SPELLINGS[spelling](value).encode()


@st.composite
def _asks(draw: st.DrawFn) -> list[EntryRow]:
    """An ask's four entries (message, intent, result, step), mostly shaped as the runtime
    writes them (so that they are packed), with arbitrary items and spellings."""
    spell = st.sampled_from([0, 0, 0, 1, 2])
    # the result spelled otherwise than its step more often: its value's text then differs
    spellings = [draw(spell), draw(spell), draw(st.sampled_from([0, 2])), draw(spell)]
    at = draw(st.one_of(st.integers(1, 2**45), _int, _json))
    inc = draw(st.one_of(st.just("71fae61705510524"), _text, _edgy, _json))
    message = [draw(_json), at, inc, *draw(st.lists(_json, max_size=2))]
    index = draw(st.one_of(st.integers(0, 3), _json))
    key = f"agent-1:{inc}:1:{index}"
    delta = draw(st.one_of(st.integers(-2, 5), _json))
    intent_at = at + delta if type(at) is int and type(delta) is int else delta
    intent = [index, 1, 1, draw(st.lists(_json, max_size=2)), key, intent_at]
    intent += draw(st.lists(st.one_of(st.just(0), _json), max_size=2))
    ok, value = draw(st.booleans()), draw(st.one_of(_edgy, _json))
    result = [draw(st.one_of(st.just(True), st.just(ok))), value, draw(_int)]
    result += draw(st.lists(_json, max_size=2))
    step_at = draw(st.one_of(st.integers(-3, 5), _json))
    if type(result[2]) is int and type(step_at) is int:
        step_at += result[2]
    reply = draw(st.one_of(st.just(value), _json))
    step = [draw(st.one_of(st.just(True), st.just(ok))), reply, step_at]
    step += draw(st.lists(_json, max_size=2))
    payloads = [
        _bytes(p, s) for p, s in zip((message, intent, result, step), spellings, strict=True)
    ]
    return [
        make_row("agent-1", 1, "message", "t.Ask", 0, "m1", payloads[0]),
        make_row("agent-1", 2, "intent", "lookup", 1, None, payloads[1]),
        make_row("agent-1", 3, "result", "lookup", 2, None, payloads[2]),
        make_row("agent-1", 4, "step", "t.Ask", 1, None, payloads[3]),
    ]


@st.composite
def _two_calls(draw: st.DrawFn) -> list[EntryRow]:
    """An ask whose step makes two calls: the second call's intent is written in the first
    call's result's append (packed against that result with its ``at`` alone, as the
    runtime writes it), then its result and the step."""
    message, intent, result, step = draw(_asks())
    first = json.loads(result.payload)
    at = first[2] if type(first) is list and len(first) > 2 else None
    delta = draw(st.one_of(st.integers(-2, 5), _json))
    second_at = at + delta if type(at) is int and type(delta) is int else delta
    items = [draw(st.one_of(st.just(1), _json)), 1, 1, draw(st.lists(_json, max_size=2))]
    items += [draw(st.one_of(st.just("agent-1:71fae61705510524:1:1"), _json)), second_at]
    items += draw(st.lists(st.one_of(st.just(0), _json), max_size=2))
    second = _bytes(items, draw(st.sampled_from([0, 0, 0, 1, 2])))
    return [
        message,
        intent,
        result,
        make_row("agent-1", 4, "intent", "lookup", 1, None, second),
        make_row("agent-1", 5, "result", "lookup", 4, None, result.payload),
        make_row("agent-1", 6, "step", "t.Ask", 1, None, step.payload),
    ]


def _packed(rows: list[EntryRow]) -> list[EntryRow]:
    """``rows`` as the store stores them, in the runtime's appends (message and intent;
    result and the next intent; result and step)."""
    return [s for i in range(0, len(rows), 2) for s in pack_rows(rows[i : i + 2])]


def _reference(stored: list[EntryRow]) -> list[bytes]:
    """Each stored payload unpacked as :func:`unpack` does it (decoding the anchors)."""
    by_seq = {r.seq: anchor(r.kind, r.payload) for r in stored}
    return [
        unpack(r, by_seq.get(r.seq - 1), by_seq.get(r.ref)) if is_packed(r.payload) else r.payload
        for r in stored
    ]


_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(rows=st.one_of(_asks(), _two_calls()))
def test_what_is_packed_reads_as_written_and_as_decoding_the_anchors_gives(
    rows: list[EntryRow],
) -> None:
    stored = _packed(rows)
    assert unpack_rows(stored, {}) == rows
    assert [r.payload for r in rows] == _reference(stored)
    # a read starting at each entry, what it needs read by itself
    for k in range(1, len(rows)):
        more = {r.seq: (r.kind, r.payload) for r in stored[:k]}
        assert unpack_rows(stored[k:], more) == rows[k:]


@_SETTINGS
@given(rows=st.one_of(_asks(), _two_calls()), data=st.data())
def test_damage_to_a_packed_entry_changes_its_payload(
    rows: list[EntryRow], data: st.DataObject
) -> None:
    """A stored byte of a packed entry flipped, replaced, added or removed: the splicing
    never gives its payload back where decoding the anchors does not (a flipped bit: both
    find it, unless the anchor's ``at`` is 0)."""
    stored = _packed(rows)
    for i in (i for i, r in enumerate(stored) if is_packed(r.payload)):
        p = stored[i].payload
        at = data.draw(st.integers(0, len(p) - 1), label="at")
        damaged = bytearray(p)
        how = data.draw(st.sampled_from(["flip", "replace", "insert", "remove"]), label="how")
        if how == "flip":
            damaged[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        elif how == "replace":
            damaged[at] ^= data.draw(st.integers(1, 255), label="by")
        elif how == "insert":
            damaged.insert(at, data.draw(st.sampled_from(b'0-,]"\\ 1'), label="byte"))
        else:
            del damaged[at]
        changed = list(stored)
        r = stored[i]
        changed[i] = EntryRow(r.actor_id, r.seq, r.kind, r.type_tag, r.ref, None, bytes(damaged), 0)
        got = unpack_rows(changed, {})[i].payload
        assert got != rows[i].payload or _reference(changed)[i] == rows[i].payload


#: a packed entry's stored bytes spelled otherwise (the same items): damage all the same
_RESPELLED = [
    (2, b'\x03[0,1,1,["q1"],0,00]'),
    (2, b'\x03[0,1,1,["q1"],0,-0]'),
    (2, b'\x03[0,1,1,["q1"],0, 0]'),
    (2, b'\x03[0,1,1,["q1"], 0,0]'),
    (2, b'\x03[0,1,1,["q\\u0031"],0,0]'),
    (4, b"\x05[true,0,02,645]"),
    (4, b"\x05[true,0,2,0645]"),
    (4, b"\x05[true,0, 2,645]"),
    (4, b"\x05[true,0,2.0,645]"),
    (4, b"\x05[true,-0,2,645]"),
    (4, b"\x05[true,0,2,645 ]"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("seq", "stored"), _RESPELLED)
async def test_a_packed_entry_spelled_otherwise_is_found(
    tmp_path: Path, seq: int, stored: bytes
) -> None:
    """FORMAT.md [F21]: the stored text is spliced as it is, so a packed entry whose bytes
    differ from what was written (a number with a leading zero or a sign, a space, an
    escape) reads as a payload its checksum does not match."""
    path = tmp_path / "agents.db"
    await _write(path, [MESSAGE, INTENT], [RESULT, STEP])
    assert _stored(path)[seq] != stored
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute(f"UPDATE log SET payload = ? WHERE {log_seq(path)} = ?", (stored, seq))
    finally:
        db.close()
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        reads = [await store.read("agent-1"), await store.read("agent-1", after_seq=seq - 1)]
        if seq == 4:  # a repeated ask's lookup of its step
            reads.append(await store.find_ref("agent-1", "step", 1))
        for rows in reads:
            row = next(r for r in rows if r.seq == seq)
            with pytest.raises(CorruptEntryError):
                verify_row(row, "agent-1", seq)
    finally:
        await store.close()


#: results and steps whose reply is not the result's value (packed with the step's ``at``
#: alone), in the shapes the splicing takes: the recovery benchmark's (a tool's text, the
#: handler's count), a span, names and negative numbers
_AT_ONLY = [
    (b'[true,"value-000001",1795829010239,14]', b"[true,24,1795829010241,464]"),
    (b"[true,7,1795829010239,14]", b'[true,"x",1795829010239,464,{"trace_id":"ab"}]'),
    (b"[true,null,1795829010239]", b"[true,-3,1795829010238]"),
    (b"[true,false,-5,1,2]", b'[true,"\xc3\xa9",0,1]'),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("result", "step"), _AT_ONLY)
async def test_a_step_packed_with_its_at_alone_is_read_without_decoding_its_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, result: bytes, step: bytes
) -> None:
    """FORMAT.md [F21]: a step whose reply is not its result's value, stored with its ``at``
    packed (flag 1), reads back as written by splicing the stored texts, in a read of the
    log, of the step alone and in the lookup of a repeated ask's step: no entry is decoded
    to unpack it (what a recovery's read of such a log paid)."""
    rows = _ask(INTENT.payload, result, step)
    await _read_without_decoding(tmp_path / "agents.db", rows, monkeypatch)


@pytest.mark.anyio
@pytest.mark.parametrize(("result", "step"), _AT_ONLY)
async def test_a_second_calls_intent_packed_with_its_at_alone_is_read_without_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, result: bytes, step: bytes
) -> None:
    """The same for a step's second call (the 2,000 sequential steps of the peers' workload):
    its intent, written in the first call's result's append, is packed against that result
    with its ``at`` alone; a read splices it in without decoding the result."""
    first = _ask(INTENT.payload, result, step)
    second = b'[1,1,1,["q2"],"agent-1:' + INC.encode() + b':1:1",1795829010240]'
    rows = [
        *first[:3],
        make_row("agent-1", 4, "intent", "lookup", 1, None, second),
        make_row("agent-1", 5, "result", "lookup", 4, None, result),
        make_row("agent-1", 6, "step", "t.Ask", 1, None, step),
    ]
    await _read_without_decoding(tmp_path / "agents.db", rows, monkeypatch)


async def _read_without_decoding(
    path: Path, rows: list[EntryRow], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Write ``rows`` in the runtime's appends (two entries each), check that what follows a
    result is packed with flag 1, and read them back (the log, from each seq, the step by its
    message) with every way of unpacking that decodes an entry failing."""
    await _write(path, *(rows[i : i + 2] for i in range(0, len(rows), 2)))
    stored = _stored(path)
    assert [stored[s][:1] for s in range(4, len(rows) + 1, 2)] == [b"\x01"] * (len(rows) // 2 - 1)

    def decoding(*args: object) -> None:
        raise AssertionError(f"decoded to unpack: {args!r}")

    monkeypatch.setattr(_sqlite_pack, "unpack", decoding)
    monkeypatch.setattr(_sqlite_pack, "anchor", decoding)
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        for after in range(len(rows)):
            assert await store.read("agent-1", after_seq=after) == rows[after:]
        assert await store.find_ref("agent-1", "step", 1) == rows[-1:]
    finally:
        await store.close()
