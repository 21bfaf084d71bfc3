"""Golden bytes: frames and checksums written by hand from docs/FORMAT.md.

Every frame below was written field by field from the frame table of FORMAT.md section 3.5
([F6]) and the snapshot frame of section 4 ([F12]); the CRC-32 and SHA-256 values were
computed from those hand-written bytes by a bit-by-bit CRC-32 and ``hashlib`` outside this
code base, and are pasted here as literals. The codec under test must produce exactly these
bytes and accept exactly these checksums; if it does not, either the code or the spec changed
the format, and existing stores would no longer open.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

import attrs
import pytest
from actorlog import ConfigurationError, CorruptEntryError, EncodeError, testing
from actorlog._journal.codec import (
    FRAME_VERSION,
    _frame_parts,
    encode_json,
    entry_checksum,
    make_row,
    snapshot_digest,
    verified_rows,
    verify_row,
)
from actorlog.store import FORMAT_VERSION, KINDS, EntryRow

# fmt: off
#: (actor_id, seq, kind, type_tag, ref, message_id, payload) -> (frame hex, CRC-32)
GOLDEN_ENTRIES: list[tuple[tuple[str, int, str, str, int, str | None, bytes], str, int]] = [
    (
        ("a1", 1, "message", "t.Msg", 0, "m1", b'{"x":1}'),
        "01"                  # frame version 1 (formats 1 and 2)   [F6]
        "01"                  # kind code: message = 1              [F4]
        "0000000000000001"    # seq, 8 bytes big-endian             [F2]
        "0000000000000000"    # ref 0
        "0002" "6131"         # len("a1"), "a1"
        "0005" "742e4d7367"   # len("t.Msg"), "t.Msg"
        "0002" "6d31"         # len("m1"), "m1"
        "00000007" "7b2278223a317d",  # len(payload), {"x":1}
        0xFF161B6D,
    ),
    (
        ("a1", 2, "step", "t.Msg", 1, None, b'{"ok":true}'),
        "01" "04"             # step = 4
        "0000000000000002" "0000000000000001"
        "0002" "6131"
        "0005" "742e4d7367"
        "ffff"                # message_id NULL: 0xFFFF and no bytes
        "0000000b" "7b226f6b223a747275657d",
        0x84227B7A,
    ),
    (
        ("\u00e9b", 259, "intent", "search", 258, None, b"{}"),
        "01" "02"             # intent = 2
        "0000000000000103" "0000000000000102"
        "0003" "c3a962"       # "éb": lengths count UTF-8 bytes (3), not characters (2) [F3]
        "0006" "736561726368"
        "ffff"
        "00000002" "7b7d",
        0xBC13DBA0,
    ),
    (
        ("x", 5, "decision", "retry", 4, None, b""),
        "01" "06"             # decision = 6
        "0000000000000005" "0000000000000004"
        "0001" "78"
        "0005" "7265747279"
        "ffff"
        "00000000",           # an empty payload still has its length field
        0x83667A0D,
    ),
]

#: (actor_id, seq, handled_seq, type_tag, schema_version, data) -> (frame hex, SHA-256)
GOLDEN_SNAPSHOT = (
    ("a1", 7, 5, "t.State", 3, b'{"n":3}'),
    "01"                      # format version
    "0002" "6131"             # len("a1"), "a1"
    "0000000000000007"        # seq
    "0000000000000005"        # handled_seq
    "00000003"                # schema_version, 4 bytes
    "0007" "742e5374617465"   # len("t.State"), "t.State"
    "0000000000000007"        # len(data), 8 bytes
    "7b226e223a337d",         # {"n":3}
    "44f2945ca1f5dab95a6cd76baca497a08d685ed4eb7b4cb4832ad2de9546059e",
)
# fmt: on

_IDS = [g[0][2] for g in GOLDEN_ENTRIES]


def test_format_version_and_kind_codes() -> None:
    """[F1] the format is version 4 (its frames still begin with byte 1, [F6]); [F4] kind
    codes are 1..6 in table order."""
    assert FORMAT_VERSION == 5
    assert FRAME_VERSION == 1
    assert KINDS == ("message", "intent", "result", "step", "effect", "decision")


@pytest.mark.parametrize(("fields", "frame_hex", "crc"), GOLDEN_ENTRIES, ids=_IDS)
def test_entry_frame_is_the_documented_bytes(
    fields: tuple[str, int, str, str, int, str | None, bytes], frame_hex: str, crc: int
) -> None:
    """[F6] the codec frames an entry exactly as FORMAT.md's table says ([F2] big-endian)."""
    head, payload = _frame_parts(*fields)
    assert (head + payload).hex() == frame_hex


@pytest.mark.parametrize(("fields", "frame_hex", "crc"), GOLDEN_ENTRIES, ids=_IDS)
def test_entry_checksum_is_the_crc32_of_the_documented_frame(
    fields: tuple[str, int, str, str, int, str | None, bytes], frame_hex: str, crc: int
) -> None:
    """[F6] the checksum is the zlib CRC-32 of the frame: the hand-computed value, the
    value zlib gives for the literal bytes, and the codec's value agree."""
    assert zlib.crc32(bytes.fromhex(frame_hex)) == crc
    assert entry_checksum(*fields) == crc


@pytest.mark.parametrize(("fields", "frame_hex", "crc"), GOLDEN_ENTRIES, ids=_IDS)
def test_golden_entry_verifies(
    fields: tuple[str, int, str, str, int, str | None, bytes], frame_hex: str, crc: int
) -> None:
    """[F7] a row with the golden checksum is valid at its position, and make_row writes
    that checksum."""
    row = EntryRow(*fields, checksum=crc)
    verify_row(row, fields[0], fields[1])
    assert make_row(*fields) == row


@pytest.mark.parametrize(("fields", "frame_hex", "crc"), GOLDEN_ENTRIES, ids=_IDS)
def test_decode_rejects_crc_mismatch(
    fields: tuple[str, int, str, str, int, str | None, bytes], frame_hex: str, crc: int
) -> None:
    """[F7] rule 4: one flipped checksum bit is corruption."""
    row = EntryRow(*fields, checksum=crc ^ 1)
    with pytest.raises(CorruptEntryError) as info:
        verify_row(row, fields[0], fields[1])
    assert info.value.check == "checksum"


def test_decode_rejects_a_changed_covered_field() -> None:
    """[F6] the checksum covers identity and position: the golden checksum with another
    seq, ref, message id or payload does not verify."""
    fields, _, crc = GOLDEN_ENTRIES[0]
    actor, seq, kind, tag, ref, mid, payload = fields
    for changed in (
        EntryRow(actor, seq, kind, tag, ref + 1, mid, payload, crc),
        EntryRow(actor, seq, kind, tag, ref, "m2", payload, crc),
        EntryRow(actor, seq, kind, tag, ref, None, payload, crc),
        EntryRow(actor, seq, kind, tag, ref, mid, b'{"x":2}', crc),
        EntryRow(actor, seq, "step", tag, ref, mid, payload, crc),
    ):
        with pytest.raises(CorruptEntryError):
            verify_row(changed, actor, seq)


def test_decode_rejects_wrong_position() -> None:
    """[F7] rules 1 and 2: a valid row read for another actor or seq is corruption."""
    fields, _, crc = GOLDEN_ENTRIES[0]
    row = EntryRow(*fields, checksum=crc)
    with pytest.raises(CorruptEntryError) as info:
        verify_row(row, "a2", 1)
    assert info.value.check == "identity"
    with pytest.raises(CorruptEntryError) as info:
        verify_row(row, "a1", 2)
    assert info.value.check == "seq chain"


def _log(n: int) -> list[EntryRow]:
    tags = ("t.Msg", "bench.work", "t.\u00e9")
    return [
        make_row("a1", s, KINDS[s % 5], tags[s % 3], s - 1, f"m{s}" if s % 4 else None, b"[%d]" % s)
        for s in range(1, n + 1)
    ]


#: damage to one row: a changed field (the checksum kept), or a field no entry can hold
_DAMAGE = [
    ("actor_id", "a2"),
    ("seq", 99),
    ("seq", -1),
    ("kind", "note"),
    ("type_tag", "t.Other"),
    ("type_tag", "\udcff"),
    ("ref", 7),
    ("ref", -1),
    ("ref", 2**64),
    ("message_id", "m0"),
    ("message_id", None),
    ("message_id", "x" * 70_000),
    ("payload", b"[0]"),
    ("payload", "[1]"),
    ("checksum", 0),
]


@pytest.mark.parametrize(("field", "value"), _DAMAGE)
@pytest.mark.parametrize("at", [0, 3, 5])
def test_verified_rows_stops_at_the_first_damaged_row_with_verify_rows_error(
    field: str, value: object, at: int
) -> None:
    """[F7] a batch is verified as ``verify_row`` verifies each row: every row before the
    damaged one is yielded, then the damaged one raises ``verify_row``'s own error."""
    rows = _log(6)
    changes: dict[str, Any] = {field: value}
    rows[at] = attrs.evolve(rows[at], **changes)
    if field == "message_id" and rows[at].message_id == _log(6)[at].message_id:
        rows[at] = attrs.evolve(rows[at], message_id="m0")  # (row 3 has none)
    with pytest.raises(CorruptEntryError) as expected:
        verify_row(rows[at], "a1", at + 1)
    got: list[EntryRow] = []
    with pytest.raises(CorruptEntryError) as info:
        got.extend(verified_rows(rows, "a1", 1))
    assert got == rows[:at]
    assert (info.value.seq, info.value.check, info.value.detail) == (
        expected.value.seq,
        expected.value.check,
        expected.value.detail,
    )


def test_verified_rows_yields_a_valid_log_from_any_position(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A valid log is verified without ``verify_row`` (its one-row way is for damage)."""
    rows = _log(9)
    with monkeypatch.context() as m:
        m.setattr("actorlog._journal.frames.verify_row", pytest.fail)
        assert list(verified_rows(rows, "a1", 1)) == rows
    assert list(verified_rows(rows, "a1", 1)) == rows
    assert list(verified_rows(rows[4:], "a1", 5)) == rows[4:]
    with pytest.raises(CorruptEntryError, match="found seq 5 where 4 was expected"):
        list(verified_rows(rows[4:], "a1", 4))


def test_snapshot_digest_is_the_sha256_of_the_documented_frame() -> None:
    """[F12] the snapshot digest is SHA-256 of the snapshot frame of FORMAT.md section 4."""
    fields, frame_hex, digest = GOLDEN_SNAPSHOT
    assert hashlib.sha256(bytes.fromhex(frame_hex)).hexdigest() == digest
    assert snapshot_digest(*fields).hex() == digest


def test_payload_json_is_compact_utf8() -> None:
    """[F3] payloads are compact UTF-8 JSON: no insignificant whitespace, non-ASCII text as
    UTF-8 bytes (not \\u escapes)."""
    assert encode_json({"k": "\u00e9", "n": [1, 2]}, "test") == bytes.fromhex(
        "7b226b223a22c3a9222c226e223a5b312c325d7d"  # {"k":"é","n":[1,2]}
    )


def test_payload_json_has_no_nan() -> None:
    """[F3] NaN and Infinity are not JSON: refused at the call."""
    with pytest.raises(EncodeError):
        encode_json({"x": float("nan")}, "test")


@pytest.mark.parametrize(("fields", "frame_hex", "crc"), GOLDEN_ENTRIES, ids=_IDS)
def test_the_store_kit_frames_as_the_codec_does(
    fields: tuple[str, int, str, str, int, str | None, bytes], frame_hex: str, crc: int
) -> None:
    """[F6] [F12] actorlog.testing computes checksums and digests from FORMAT.md's
    pseudocode, independently of the codec: both give the golden values."""
    actor_id, seq, kind, tag, ref, message_id, payload = fields
    row = testing.make_entry(actor_id, seq, kind, tag, ref, message_id=message_id, payload=payload)
    assert row.checksum == testing.entry_checksum(row) == crc
    snap_fields, _, digest = GOLDEN_SNAPSHOT
    assert testing.snapshot_digest(*snap_fields).hex() == digest


class _Id(str):
    """A str subclass: a valid message id like any other str."""


@pytest.mark.parametrize(
    ("message_id", "why"),
    [
        ("", "non-empty str"),
        (b"m1", "non-empty str"),
        (7, "non-empty str"),
        ("m\udcff1", "lone surrogates"),
        ("m\x001", "NUL character"),
        ("m" * 0xFFFF, "too long"),
        ("\u00e9" * 0x8000, "too long"),  # 32,768 characters, 65,536 UTF-8 bytes
    ],
    ids=["empty", "bytes", "int", "surrogate", "nul", "long", "long-utf8"],
)
def test_make_row_refuses_a_message_id_no_entry_can_hold(message_id: object, why: str) -> None:
    """make_row checks the id on the bytes it frames: each kind of bad id is the typed
    error ``validate_message_id`` raises, before anything is framed."""
    with pytest.raises(ConfigurationError, match=why):
        make_row("a1", 1, "message", "t.Msg", 0, message_id, b"{}")  # type: ignore[arg-type]


def test_make_row_frames_a_str_subclass_and_the_longest_id_like_a_str() -> None:
    longest = "m" * 0xFFFE  # NO_MESSAGE_ID - 1 bytes: the longest id a frame holds
    for message_id in (_Id("m1"), longest, "\u00e9" * 0x7FFF):
        row = make_row("a1", 1, "message", "t.Msg", 0, message_id, b"{}")
        plain = make_row("a1", 1, "message", "t.Msg", 0, str(message_id), b"{}")
        assert row == plain
        assert row.checksum == entry_checksum(
            "a1", 1, "message", "t.Msg", 0, str(message_id), b"{}"
        )
        verify_row(row, "a1", 1)
