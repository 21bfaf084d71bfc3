"""Golden bytes of format 2's compact payloads (FORMAT.md [F19]), written by hand from the
layout table: each builder's payload encodes to exactly these bytes, decodes to the same
record as its format-1 JSON object, and a damaged compact payload is named damage."""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from actorlog import (
    Actor as _Actor,
    ActorSystem,
    Context as _Context,
    CorruptEntryError,
    message as _actorlog_message,
    ops,
)
from actorlog._journal import codec as _codec, compact as _compact, records as _records
from actorlog._journal.records import decode_entry
from actorlog.store import EntryRow
from actorlog.stores import SqliteStore

T = 1_700_000_000.25
AT = b"1700000000250"  # [F19] ``at``: integer milliseconds


@pytest.fixture
def frozen_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("actorlog._journal.records.time.time", lambda: T)


# (kind, builder, the compact bytes [F19])
GOLDEN: list[tuple[str, Callable[[], Any], bytes]] = [
    (
        "message",
        lambda: _records.message_payload({"x": 1}, sender=None, trace=None, incarnation="0a1b"),
        b'[{"x":1},' + AT + b',"0a1b"]',  # sender and trace null: left out
    ),
    (
        "message",
        lambda: _records.message_payload({"x": 1}, sender="b", trace=None),
        b'[{"x":1},' + AT + b',null,"b"]',  # no incarnation: null before the sender
    ),
    (
        "intent",
        lambda: _records.intent_payload(
            index=0, effect="write", policy="escalate", args=[1], kwargs={"x": "é"}, key="a:1:0"
        ),
        b'[0,1,3,[1],"a:1:0",' + AT + b',{"x":"\xc3\xa9"}]',  # write = 1, escalate = 3
    ),
    (
        "intent",
        lambda: _records.intent_payload(
            index=2, effect="read", policy="rerun", args=[], kwargs={}, key="k"
        ),
        b'[2,0,0,[],"k",' + AT + b"]",  # kwargs {} and no task: left out
    ),
    (
        "intent",
        lambda: _records.intent_payload(
            index=1, task="1.0", effect="read", policy="rerun", args=[], kwargs={}, key="k"
        ),
        b'[1,0,0,[],"k",' + AT + b',{},"1.0"]',  # a task: kwargs {} stays before it
    ),
    (
        "result",
        lambda: _records.result_payload(value=[2], attempt=2, duration=0.5),
        b"[true,[2]," + AT + b",500000,2]",  # duration: integer microseconds
    ),
    (
        "result",
        lambda: _records.result_payload(value="v", duration=0.25),
        b'[true,"v",' + AT + b",250000]",  # attempt 1, settled_by run: left out
    ),
    (
        "result",
        lambda: _records.result_payload(
            error={"type": "Cancelled", "message": "m"},
            settled_by="cancelled",
            doubt=_records.doubt_keys(True, None),
        ),
        b'[false,{"type":"Cancelled","message":"m"},' + AT + b",0,1,2,true]",
    ),
    (
        "result",
        lambda: _records.result_payload(
            value=None, settled_by="cancelled", doubt=_records.doubt_keys(False, "happened", 7)
        ),
        b"[true,null," + AT + b',0,1,2,false,"happened",7]',
    ),
    (
        "effect",
        lambda: _records.effect_payload(index=0, value=0.5),
        b"[0,0.5," + AT + b"]",
    ),
    (
        "effect",
        lambda: _records.effect_payload(index=3, value="u", task="0"),
        b'[3,"u",' + AT + b',"0"]',
    ),
    (
        "step",
        lambda: _records.step_payload(reply="r", duration=0.25),
        b'[true,"r",' + AT + b",250000]",  # span null: left out
    ),
    (
        "step",
        lambda: _records.step_payload(
            error={"type": "E", "message": "m"}, span={"trace_id": "t", "span_id": "s"}
        ),
        b'[false,{"type":"E","message":"m"},' + AT + b',0,{"trace_id":"t","span_id":"s"}]',
    ),
    (
        "decision",  # no compact form: the JSON object of format 1
        lambda: _records.decision_payload(action="retry", by="op", reason="why"),
        b'{"action":"retry","by":"op","reason":"why","at":1700000000.25}',
    ),
]
_IDS = [f"{g[0]}-{i}" for i, g in enumerate(GOLDEN)]


def _row(kind: str, payload: bytes) -> EntryRow:
    tag = "retry" if kind == "decision" else "t"
    return _codec.make_row("a1", 3, kind, tag, 1, None, payload)


@pytest.mark.usefixtures("frozen_time")
@pytest.mark.parametrize(("kind", "build", "golden"), GOLDEN, ids=_IDS)
def test_a_payload_is_written_in_its_compact_form(
    kind: str, build: Callable[[], Any], golden: bytes
) -> None:
    """[F19] the bytes of the layout table, field by field."""
    assert _compact.encode_entry(kind, build()) == golden


@pytest.mark.usefixtures("frozen_time")
@pytest.mark.parametrize(("kind", "build", "golden"), GOLDEN, ids=_IDS)
def test_a_compact_payload_reads_as_its_format_1_object(
    kind: str, build: Callable[[], Any], golden: bytes
) -> None:
    """[F19] format 2 and format 1 bytes of one payload decode to one record (format 1
    wrote the record's JSON object, [F5])."""
    rec = decode_entry(_row(kind, golden))
    old = _codec.encode_plain(rec.payload(), "format 1")
    assert old.startswith(b"{")
    assert decode_entry(_row(kind, old)) == rec
    assert _compact.encode_entry(kind, rec.payload()) == golden  # a dict: the same array


# The golden entry of FORMAT.md section 3.5, with a format-2 payload: the frame is the
# format-1 frame (its first byte is still 1), over the compact payload's bytes.
V2_PAYLOAD = b'[{"x":1},1700000000250,"0123456789abcdef"]'
V2_FRAME = (
    "01"  # frame version 1 (formats 1 and 2)  [F6]
    "01"  # message
    "0000000000000001"
    "0000000000000000"
    "0002"
    "6131"
    "0005"
    "742e4d7367"
    "0002"
    "6d31"
    "0000002a"  # len(payload): 42
    "5b7b2278223a317d2c313730303030303030303235302c2230313233343536373839616263646566225d"
)
V2_CRC = 0x4D9C3B0D


def test_a_format_2_entry_has_the_documented_frame_and_checksum() -> None:
    """[F6] [F19] the checksum of a compact entry: the CRC-32 of the documented frame."""
    fields = ("a1", 1, "message", "t.Msg", 0, "m1", V2_PAYLOAD)
    head, payload = _codec._frame_parts(*fields)
    assert (head + payload).hex() == V2_FRAME
    assert zlib.crc32(bytes.fromhex(V2_FRAME)) == V2_CRC
    row = _codec.make_row(*fields)
    assert row.checksum == V2_CRC
    _codec.verify_row(row, "a1", 1)
    rec = decode_entry(row)
    assert isinstance(rec, _records.MessageRecord)
    assert (rec.body, rec.at, rec.incarnation) == ({"x": 1}, T, "0123456789abcdef")


def test_every_flipped_bit_of_a_compact_payload_is_caught() -> None:
    """[F7] rule 4: one flipped bit anywhere in a compact payload fails the checksum."""
    row = _codec.make_row("a1", 1, "message", "t.Msg", 0, "m1", V2_PAYLOAD)
    for i in range(len(V2_PAYLOAD) * 8):
        damaged = bytearray(V2_PAYLOAD)
        damaged[i // 8] ^= 1 << (i % 8)
        bad = EntryRow("a1", 1, "message", "t.Msg", 0, "m1", bytes(damaged), row.checksum)
        with pytest.raises(CorruptEntryError) as info:
            _codec.verify_row(bad, "a1", 1)
        assert info.value.check == "checksum"


@pytest.mark.parametrize(
    ("kind", "payload", "why"),
    [
        ("message", b"[{}]", "1 items, a message payload has 2 to 5"),
        ("effect", b"[0,1,2,3,4]", "5 items, a effect payload has 2 to 4"),
        ("intent", b'[0,7,0,[],"k",1]', "field 'effect' holds the unknown code 7"),
        ("intent", b'[0,0,-1,[],"k",1]', "field 'policy' holds the unknown code -1"),
        ("result", b"[true,1,2,3,1,9]", "field 'settled_by' holds the unknown code 9"),
        ("message", b"[{},1.5]", "field 'at' is not an integer"),
        ("step", b'[true,1,2,"3"]', "field 'duration' is not an integer"),
        ("decision", b'["retry"]', "a decision payload is a JSON object, not an array"),
        ("intent", b'["0",0,0,[],"k",1]', "field 'index' is not an integer"),
        ("result", b'["yes",1,2]', "field 'ok' is not true or false"),
        ("intent", b'[0,"write","rerun","x","k",1]', "field 'args' is not a list"),
    ],
)
def test_a_compact_payload_that_breaks_its_layout_is_damage(
    kind: str, payload: bytes, why: str
) -> None:
    """[F7] rule 5, [F19]: a compact payload whose items do not fit its layout is a
    ``CorruptEntryError`` with check ``decode`` naming the field, never an internal error."""
    tag = "retry" if kind == "decision" else "t"
    with pytest.raises(CorruptEntryError) as info:
        decode_entry(_codec.make_row("a1", 3, kind, tag, 1, None, payload))
    assert info.value.check == "decode"
    assert why in str(info.value)


def test_a_payload_without_a_compact_form_is_written_as_its_object() -> None:
    """[F19] a key the layout does not know, or a time that is not a number, keeps the
    format-1 object (which every reader reads)."""
    odd = {"ok": True, "value": 1, "at": 1.0, "extra": 2}
    assert _compact.encode_entry("result", odd) == b'{"ok":true,"value":1,"at":1.0,"extra":2}'
    late = {"index": 0, "value": 1, "at": "later"}
    assert _compact.encode_entry("effect", late).startswith(b"{")


def test_large_snapshot_data_is_stored_compressed() -> None:
    """[F19] state JSON of 1 KiB or more is stored as a zlib stream when that is shorter;
    smaller (or incompressible) data is stored as it is."""
    big = b'{"notes":"' + b"abc" * 1000 + b'"}'
    packed = _compact.pack_snapshot(big)
    assert packed[:1] == b"\x78" and len(packed) < len(big) // 10
    assert _compact.snapshot_json(packed) == big
    small = b'{"n":1}'
    assert _compact.pack_snapshot(small) == small == _compact.snapshot_json(small)
    with pytest.raises(ValueError, match="does not decompress"):
        _compact.snapshot_json(packed[:-4])


@_actorlog_message(name="compact.note")
@attrs.define
class _Note:
    text: str


@attrs.define
class _Book:
    pages: list[str] = attrs.Factory(list)


class _Writer(_Actor[_Book], name="compact.writer"):
    async def receive(self, ctx: _Context, msg: _Note) -> int:
        self.state.pages.append(msg.text)
        return len(self.state.pages)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.anyio
async def test_a_compressed_snapshot_recovers_and_a_flipped_bit_falls_back(
    tmp_path: Path,
) -> None:
    """[F19] [F12] a large state is snapshotted compressed, recovered from it, exported
    decoded and verified; a flipped bit in the compressed bytes fails the digest and
    recovery falls back to the older snapshot (then replays the log)."""
    path = tmp_path / "agents.db"
    page = "lorem ipsum " * 200  # 2,400 bytes, compressible
    async with ActorSystem(SqliteStore(path), actors=[_Writer]) as system:
        ref = await system.spawn(_Writer, "w", snapshot_every=1, snapshot_keep=2)
        for i in range(3):
            assert await ref.ask(_Note(f"{i}:{page}")) == i + 1
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT seq, size, data FROM snapshots ORDER BY seq").fetchall()
    finally:
        db.close()
    assert len(rows) == 2
    for _, size, data in rows:
        assert data[:1] == b"\x78" and size == len(data) < len(page) // 4
    async with ops.opened(f"sqlite:///{path}") as store:
        assert (await ops.verify(store)).ok
        states = [i["state"] async for i in ops.export(store, "w") if i["type"] == "snapshot"]
    assert sorted(len(s["pages"]) for s in states) == [2, 3]  # newest first
    newest_seq = rows[-1][0]
    db = sqlite3.connect(path)
    try:  # flip one bit in the middle of the newest snapshot's compressed bytes
        data = bytearray(rows[-1][2])
        data[len(data) // 2] ^= 0x10
        db.execute("UPDATE snapshots SET data = ? WHERE seq = ?", (bytes(data), newest_seq))
        db.commit()
    finally:
        db.close()
    async with ActorSystem(SqliteStore(path), actors=[_Writer]) as system:
        state = await system.read_state(_Writer, "w")
        assert [p.split(":")[0] for p in state.pages] == ["0", "1", "2"]
    async with ops.opened(f"sqlite:///{path}") as store:
        report = await ops.verify(store)
    assert [(f.seq, f.check) for f in report.findings if f.actor_id == "w"] == [
        (newest_seq, "digest")
    ], report.findings
