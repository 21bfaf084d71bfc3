"""Format 4's packed payloads (docs/FORMAT.md [F21]): the golden stored bytes of an ask's
four entries, reads that hand back the payloads their checksums cover (a range, a lone
step), every flipped bit of a packed entry or of an entry it was packed against found, a
compaction that removes what a kept entry was packed against, and the runtime's keys and
replies unchanged by it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from actorlog import ActorSystem, ops
from actorlog._journal.codec import log_start_checksum, make_row, verify_row
from actorlog.errors import CorruptEntryError
from actorlog.store import EntryRow
from actorlog.stores import SqliteStore
from actorlog.stores._sqlite_pack import pack_rows
from actorlog.stores._sqlite_unpack import unpack_rows

from tests._sqlitefile import log_seq, new_files_in
from tests.upgrading._old_files import _clean  # noqa: F401 (autouse: the payer's hooks)
from tests.upgrading.agents import KEYS, Payer, Question

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True, params=[4, 5], ids=["format4", "format5"])
def _layout(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """New files made in format 4 (format 3's tables) and in format 5 (a rowid ``log``):
    both pack payloads alike ([F21])."""
    layout: int = request.param
    new_files_in(monkeypatch, layout)
    return layout


INC = "71fae61705510524"
#: FORMAT.md [F21]'s example: an ask whose step makes one call, in its two appends
MESSAGE = make_row(
    "agent-1",
    1,
    "message",
    "t.Ask",
    0,
    "m1",
    b'[{"question":"q1"},1795829010238,"' + INC.encode() + b'"]',
)
INTENT = make_row(
    "agent-1", 2, "intent", "lookup", 1, None,
    b'[0,1,1,["q1"],"agent-1:' + INC.encode() + b':1:0",1795829010238]',
)  # fmt: skip
RESULT = make_row(
    "agent-1", 3, "result", "lookup", 2, None, b'[true,"answer to q1",1795829010239,14]'
)
STEP = make_row("agent-1", 4, "step", "t.Ask", 1, None, b'[true,"answer to q1",1795829010241,645]')
#: what the file stores of each (by seq): the intent and the step packed
GOLDEN = {
    1: MESSAGE.payload,
    2: b'\x03[0,1,1,["q1"],0,0]',
    3: RESULT.payload,
    4: b"\x05[true,0,2,645]",
}


def _stored(path: Path) -> dict[int, bytes]:
    db = sqlite3.connect(path)
    try:
        return dict(db.execute(f"SELECT {log_seq(path)}, payload FROM log ORDER BY 1"))
    finally:
        db.close()


async def _write(path: Path, *appends: list[EntryRow]) -> None:
    store = SqliteStore(path)
    await store.open()
    try:
        await store.register_actor("agent-1", "t.Agent")
        last = 0
        for rows in appends:
            await store.append("agent-1", last, rows)
            last = rows[-1].seq
    finally:
        await store.close()


async def test_an_ask_is_stored_packed_and_read_as_written(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    await _write(path, [MESSAGE, INTENT], [RESULT, STEP])
    assert _stored(path) == GOLDEN
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        assert store.layout >= 4
        assert await store.read("agent-1") == [MESSAGE, INTENT, RESULT, STEP]
        # a read that starts after what an entry was packed against reads that too
        assert await store.read("agent-1", after_seq=3) == [STEP]
        assert await store.read("agent-1", after_seq=1, upto_seq=2) == [INTENT]
        assert await store.find_ref("agent-1", "step", 1) == [STEP]  # a repeated ask
        assert await store.find_ref("agent-1", "result", 2) == [RESULT]
        assert (await ops.verify(store)).ok
    finally:
        await store.close()


async def test_what_is_not_in_the_same_append_is_not_packed(tmp_path: Path) -> None:
    """An entry is packed only against the entries of its own append (written in the same
    transaction): one append an entry stores every payload as it is."""
    path = tmp_path / "agents.db"
    await _write(path, [MESSAGE], [INTENT], [RESULT], [STEP])
    assert _stored(path) == {
        1: MESSAGE.payload,
        2: INTENT.payload,
        3: RESULT.payload,
        4: STEP.payload,
    }


#: a step whose reply is not its result's value: packed with its ``at`` alone (flag 1)
STEP_AT = make_row("agent-1", 4, "step", "t.Ask", 1, None, b"[true,24,1795829010241,645]")


@pytest.mark.parametrize("step", [STEP, STEP_AT], ids=["reply", "at"])
@pytest.mark.parametrize("seq", [1, 2, 3, 4])
async def test_every_flipped_bit_of_a_packed_entry_or_its_anchors_is_found(
    tmp_path: Path, seq: int, step: EntryRow
) -> None:
    """FORMAT.md [F21]: damage to any stored byte of a packed entry (its flag, a delta, a
    placeholder) or of an entry it was packed against (the message, the result) changes a
    payload a checksum covers."""
    path = tmp_path / "agents.db"
    await _write(path, [MESSAGE, INTENT], [RESULT, step])
    stored = _stored(path)[seq]
    where = log_seq(path)
    db = sqlite3.connect(path, isolation_level=None)
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        for i in range(len(stored)):
            for bit in range(8):
                damaged = bytearray(stored)
                damaged[i] ^= 1 << bit
                db.execute(f"UPDATE log SET payload = ? WHERE {where} = ?", (bytes(damaged), seq))
                rows = await store.read("agent-1")
                bad = []
                for row in rows:
                    try:
                        verify_row(row, "agent-1", row.seq)
                    except CorruptEntryError:
                        bad.append(row.seq)
                assert seq in bad or (seq == 1 and 2 in bad), (i, bit, rows)
        db.execute(f"UPDATE log SET payload = ? WHERE {where} = ?", (stored, seq))
        assert (await ops.verify(store)).ok
    finally:
        await store.close()
        db.close()


async def test_a_compaction_stores_unpacked_what_was_packed_against_removed_entries(
    tmp_path: Path,
) -> None:
    """The first kept entry packed against the one before it, and an intent packed against
    its step's message, lose nothing when those go: they are stored unpacked first."""
    queued = make_row(
        "agent-1",
        1,
        "message",
        "t.Ask",
        0,
        "m0",
        b'[{"question":"q0"},1795829010230,"' + INC.encode() + b'"]',
    )
    rows = [
        queued,
        make_row("agent-1", 2, "message", "t.Ask", 0, "m1", MESSAGE.payload),
        make_row("agent-1", 3, "intent", "lookup", 1, None,
                 b'[0,1,1,["q0"],"agent-1:' + INC.encode() + b':1:0",1795829010239]'),
        make_row("agent-1", 4, "result", "lookup", 3, None, RESULT.payload),
        make_row("agent-1", 5, "step", "t.Ask", 1, None, STEP.payload),
    ]  # fmt: skip
    path = tmp_path / "agents.db"
    await _write(path, rows[:3], rows[3:])
    before = _stored(path)
    assert before[3][:1] == b"\x03" and before[5][:1] == b"\x05"
    store = SqliteStore(path)
    await store.open()
    try:
        # seq 3 is an intent of message 1 (queued before message 2), packed against it
        assert await store.compact("agent-1", 1, checksum=log_start_checksum("agent-1", 2)) == 1
        assert await store.read("agent-1") == rows[1:]
        assert (await ops.verify(store)).ok
        # the step, packed against the result before it (its message long gone too)
        assert await store.compact("agent-1", 4, checksum=log_start_checksum("agent-1", 5)) == 3
        assert await store.read("agent-1") == rows[4:]
    finally:
        await store.close()
    assert _stored(path) == {5: STEP.payload}


async def test_the_runtime_writes_packed_entries_with_the_same_keys_and_replies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(path), actors=[Payer]) as system:
        ref = await system.spawn(Payer, "pay-1")
        assert await ref.ask(Question("q1"), message_id="q1") == "charged q1"
        assert await ref.ask(Question("q2"), message_id="q2") == "charged q2"
    firsts = [p[:1] for p in _stored(path).values()]
    assert firsts == [b"[", b"\x03", b"[", b"\x05"] * 2
    async with ActorSystem(SqliteStore(path), actors=[Payer]) as system:
        ref = await system.spawn(Payer, "pay-1")
        assert await ref.ask(Question("q1"), message_id="q1") == "charged q1"  # the log's
        state = await system.read_state(Payer, "pay-1")
    assert state.answers == ["charged q1", "charged q2"]
    async with ops.opened(f"sqlite:///{path}") as store:
        assert (await ops.verify(store)).ok
        lines = [e async for e in ops.export(store, "pay-1")]
    intents = [e["payload"][4] for e in lines if e.get("kind") == "intent"]
    assert intents == KEYS and len(KEYS) == 2  # the keys the tool got, as recorded


def _ask(
    intent: bytes, result: bytes, step: bytes, message: bytes = MESSAGE.payload
) -> list[EntryRow]:
    return [
        make_row("agent-1", 1, "message", "t.Ask", 0, "m1", message),
        make_row("agent-1", 2, "intent", "lookup", 1, None, intent),
        make_row("agent-1", 3, "result", "lookup", 2, None, result),
        make_row("agent-1", 4, "step", "t.Ask", 1, None, step),
    ]


_K = b'"agent-1:' + INC.encode() + b":1:"


#: asks whose entries are packed, or stored as they are, in every shape worth checking
CASES = [
    _ask(INTENT.payload, RESULT.payload, STEP.payload),
    # a task's call, kwargs, a key that is not the derived one, a reply that differs
    _ask(b"[0,1,1,[],"+_K+b'0.3",5,{"a":1},"0"]', b'[true,"x",7,1]', b'[true,"y",3,1]'),
    _ask(b"[3,1,1,[],"+_K+b'0.3",5,{},"0"]', b'[true,{"\xc3\xa9":[1,2]},7,1]',
         b'[true,{"\xc3\xa9":[1,2]},9,1]'),
    _ask(b'[0,1,1,[],"other-key",5]', b'[false,{"type":"E","message":"m"},7,1]',
         b'[false,{"type":"E","message":"m"},9,1]'),
    # times that are not integers, null, negative differences, whitespace, objects
    _ask(b"[0,1,1,[]," + _K + b'0",null]', b"[true,1,null,1]", b"[true,1,5,1]"),
    _ask(b"[0,1,1,[]," + _K + b'0",1]', b"[true,1,1795829010239,1]", b"[true,1,2,1]"),
    _ask(b"[0, 1,1,[]," + _K + b'0",1]', b'{"ok":true,"value":1}', b"[true,1,2.5,1]"),
    _ask(INTENT.payload, RESULT.payload, STEP.payload, b'[{"q":1},17,null]'),
    # replies equal in Python but not in bytes (1 == True == 1.0), spelled otherwise
    _ask(INTENT.payload, b"[true,true,7,1]", b"[true,1,9,1]"),
    _ask(INTENT.payload, b"[true,1,7,1]", b"[true,1.0,9,1]"),
    _ask(INTENT.payload, b"[true,1e5,7,1]", b"[true,1e5,9,1]"),
    _ask(INTENT.payload, b'[true,"\\u00e9",7,1]', b'[true,"\\u00e9",9,1]'),
    _ask(INTENT.payload, RESULT.payload, STEP.payload, b'{"body":1,"at":1.5}'),
    # values the decoder takes and the encoder refuses: stored as they are
    _ask(INTENT.payload, b"[true,Infinity,7,1]", b"[true,Infinity,9,1]"),
    _ask(b"[0,1,1,[NaN]," + _K + b'0",5]', RESULT.payload, STEP.payload),
    # the items put back into the stored text: non-ASCII text, a span, an `at` null or
    # before the result's, a reply that is an array, an intent of seven items whose
    # last two are 0, an intent whose args hold its key and zeros
    _ask(INTENT.payload, b'[true,"\xc3\xa9t\xc3\xa9",7,1]',
         b'[true,"\xc3\xa9t\xc3\xa9",9,1,{"trace_id":"ab","span_id":"cd"}]'),
    _ask(INTENT.payload, b'[true,"x",7,1]', b'[true,"x",null,1]'),
    # a reply that is not the result's value, after values of every short form
    _ask(INTENT.payload, b'[true,"a",7,1]', b'[true,-2,9,1,{"trace_id":"ab"}]'),
    _ask(INTENT.payload, b"[true,null,7]", b'[true,"a\\"b",9,1]'),
    _ask(INTENT.payload, b'[true,"a\\"b",7,1]', b"[true,false,9]"),
    _ask(INTENT.payload, b"[true,12,-7,1]", b'[true,"",00,1]'),
    _ask(INTENT.payload, b'[true,[1,{"a":null}],9,1]', b'[true,[1,{"a":null}],7]'),
    _ask(b"[0,1,1,[]," + _K + b'0",1795829010238,0]', RESULT.payload, STEP.payload),
    _ask(b"[0,1,1,[" + _K + b'0",0,0],' + _K + b'0",1795829010238]', RESULT.payload,
         STEP.payload),
]  # fmt: skip


@pytest.mark.parametrize("rows", CASES)
def test_what_is_packed_unpacks_to_its_payload(rows: list[EntryRow]) -> None:
    """FORMAT.md [F21]: a packed entry unpacks to its payload byte for byte, whatever it
    holds; an entry that cannot be packed is stored as it is."""
    stored = pack_rows(rows[:2]) + pack_rows(rows[2:])
    assert unpack_rows(stored, {}) == rows
    assert unpack_rows(
        [stored[3]], {2: ("intent", stored[1].payload), 3: ("result", stored[2].payload)}
    ) == [rows[3]]


@pytest.mark.parametrize("rows", CASES)
async def test_the_view_unpacks_as_the_store_does(tmp_path: Path, rows: list[EntryRow]) -> None:
    """FORMAT.md [F21]: SQL typed by hand reads ``entries`` unpacked, byte for byte."""
    path = tmp_path / "agents.db"
    await _write(path, rows[:2], rows[2:])
    db = sqlite3.connect(path)
    try:
        got = db.execute("SELECT payload FROM entries ORDER BY seq").fetchall()
    finally:
        db.close()
    assert [p for (p,) in got] == [r.payload for r in rows]


@pytest.mark.parametrize(
    ("rows", "flags"),
    [
        (_ask(INTENT.payload, RESULT.payload, STEP.payload), [0, 3, 0, 5]),
        (_ask(INTENT.payload, b'[true,"\xc3\xa9",7,1]', b'[true,"\xc3\xa9",9,1,{"a":"b"}]'),
         [0, 3, 0, 5]),
        (_ask(INTENT.payload, b'[true,"x",7,1]', b'[true,"x",null,1]'), [0, 3, 0, 4]),
        (_ask(INTENT.payload, b"[true,[1,{}],9,1]", b"[true,[1,{}],7]"), [0, 3, 0, 5]),
        (_ask(b"[0,1,1,[]," + _K + b'0",1795829010238,0]', RESULT.payload, b"[false,1,9]"),
         [0, 3, 0, 1]),
        (_ask(b'[0,1,1,[],"k",1795829010238,{},"t"]', RESULT.payload, STEP.payload),
         [0, 1, 0, 5]),
    ],
)  # fmt: skip
def test_a_packed_payload_is_the_encoders_text_of_its_items(
    rows: list[EntryRow], flags: list[int]
) -> None:
    """FORMAT.md [F21]: what is packed is the flag byte and the encoder's text of the
    compact array with its items replaced (the bytes a packed entry is stored as, whether
    packing replaces items in the payload's text or encodes them again)."""
    stored = pack_rows(rows[:2]) + pack_rows(rows[2:])
    assert [s.payload[0] if s.payload[0] < 8 else 0 for s in stored] == flags
    for s in stored:
        if s.payload[0] < 8:
            body = s.payload[1:]
            again = json.dumps(json.loads(body), separators=(",", ":"), ensure_ascii=False)
            assert again.encode() == body
    assert unpack_rows(stored, {}) == rows


async def test_a_repeated_asks_step_is_unpacked_before_its_row_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step lookup unpacks the stored values, then builds each row once (it built the
    packed step's ``EntryRow`` twice: checked as stored, then again unpacked)."""
    path = tmp_path / "agents.db"
    await _write(path, [MESSAGE, INTENT], [RESULT, STEP])
    from actorlog.stores import _sqlite_unpack

    built: list[object] = []

    def counted(*values: object) -> EntryRow:
        built.append(values)
        return EntryRow(*values)  # type: ignore[arg-type]  # the values of a row

    monkeypatch.setattr(_sqlite_unpack, "EntryRow", counted)
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        assert await store.find_ref("agent-1", "step", 1) == [STEP]
    finally:
        await store.close()
    assert built == []
