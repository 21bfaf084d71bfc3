"""[F6] [F7] [F12] [F16] The checksum frames: an entry's CRC-32 frame (``make_row``,
``verify_row``), a snapshot's SHA-256 digest and a compacted log's start record. Re-exported
by ``codec``; everything here is specified in ``docs/FORMAT.md``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator

from ..store import KINDS, EntryRow, SnapshotInfo
from .checks import is_utf8
from .errors import ConfigurationError, CorruptEntryError
from .ids import NO_MESSAGE_ID, validate_message_id

__all__ = [
    "FRAME_VERSION",
    "entry_checksum",
    "info_digest",
    "log_start_checksum",
    "make_row",
    "snapshot_digest",
    "verified_rows",
    "verify_row",
]

_MAX_TAG_BYTES = 1024
_KIND_CODE = {kind: code for code, kind in enumerate(KINDS, start=1)}

#: [F6] The first byte of every checksum frame: 1 in formats 1 and 2 (format 2 changed the
#: payload bytes the frames cover, not the frames)
FRAME_VERSION = 1
_HEAD = struct.Struct(">BBQQH")  # version, kind code, seq, ref, actor id length
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_NO_MESSAGE_ID_BYTES = _U16.pack(NO_MESSAGE_ID)


def _frame_parts(
    actor_id: str,
    seq: int,
    kind: str,
    type_tag: str,
    ref: int,
    message_id: str | None,
    payload: bytes,
) -> tuple[bytes, bytes]:
    """[F6] The bytes the checksum covers, as (header, payload): the checksum runs over both
    without joining them (no copy of a large payload)."""
    aid = actor_id.encode()
    tag = type_tag.encode()
    if message_id is None:
        mid = _NO_MESSAGE_ID_BYTES
    else:
        mid_bytes = message_id.encode()
        mid = _U16.pack(len(mid_bytes)) + mid_bytes
    head = b"".join(
        (
            _HEAD.pack(FRAME_VERSION, _KIND_CODE.get(kind, 0), seq, ref, len(aid)),
            aid,
            _U16.pack(len(tag)),
            tag,
            mid,
            _U32.pack(len(payload)),
        )
    )
    return head, payload


def entry_checksum(
    actor_id: str,
    seq: int,
    kind: str,
    type_tag: str,
    ref: int,
    message_id: str | None,
    payload: bytes,
) -> int:
    """[F6] CRC-32 (zlib/IEEE 802.3 polynomial) of the entry frame, as an unsigned int."""
    head, body = _frame_parts(actor_id, seq, kind, type_tag, ref, message_id, payload)
    return zlib.crc32(body, zlib.crc32(head))


#: type tag -> its frame bytes (u16 length, UTF-8), of the tags make_row checked (bounded)
_TAG_FRAMES: dict[str, bytes] = {}


def make_row(
    actor_id: str,
    seq: int,
    kind: str,
    type_tag: str,
    ref: int,
    message_id: str | None,
    payload: bytes,
) -> EntryRow:
    """Build a checksummed row. Raises ``ConfigurationError`` for a field no entry can hold.

    The checksum is ``entry_checksum``'s, computed here in one function (the hot path: four
    rows an ask) with the type tag's frame bytes kept once checked."""
    tag = _TAG_FRAMES.get(type_tag)
    if tag is None:
        if not is_utf8(type_tag):
            raise ConfigurationError(f"type tag {type_tag!r} contains lone surrogates")
        raw = type_tag.encode()
        if len(raw) > _MAX_TAG_BYTES:
            raise ConfigurationError(
                f"type tag longer than {_MAX_TAG_BYTES} bytes: {type_tag[:80]}..."
            )
        tag = _U16.pack(len(raw)) + raw
        if len(_TAG_FRAMES) < 4096:  # tags are a few per program: message types, tool names
            _TAG_FRAMES[type_tag] = tag
    if message_id is None:
        mid = _NO_MESSAGE_ID_BYTES
    else:
        # ``validate_message_id``'s checks on the bytes encoded once (a message row an ask);
        # anything else (not a str, a str subclass, lone surrogates, NUL, too long, empty)
        # goes through it: its typed error, or a str subclass that is a valid id
        try:
            mid_bytes = message_id.encode()
        except (UnicodeEncodeError, AttributeError):
            mid_bytes = b""
        if (
            type(message_id) is not str
            or not mid_bytes
            or len(mid_bytes) >= NO_MESSAGE_ID
            or b"\x00" in mid_bytes
        ):
            validate_message_id(message_id)
            mid_bytes = message_id.encode()
        mid = _U16.pack(len(mid_bytes)) + mid_bytes
    aid = actor_id.encode()
    # [F6] the frame, as _frame_parts makes it: header, then the payload (not copied)
    head = b"".join(
        (
            _HEAD.pack(FRAME_VERSION, _KIND_CODE.get(kind, 0), seq, ref, len(aid)),
            aid,
            tag,
            mid,
            _U32.pack(len(payload)),
        )
    )
    # positional, in EntryRow's field order (faster than keywords: four rows an ask)
    checksum = zlib.crc32(payload, zlib.crc32(head))
    return EntryRow(actor_id, seq, kind, type_tag, ref, message_id, payload, checksum)


def verify_row(row: EntryRow, expected_actor: str, expected_seq: int) -> None:
    """[F7] Raise ``CorruptEntryError`` unless ``row`` is a valid entry at that position."""
    if row.actor_id != expected_actor:
        raise CorruptEntryError(expected_actor, expected_seq, "identity", "wrong actor id")
    if row.seq != expected_seq:
        raise CorruptEntryError(
            expected_actor,
            expected_seq,
            "seq chain",
            f"found seq {row.seq} where {expected_seq} was expected",
        )
    if row.kind not in _KIND_CODE:
        raise CorruptEntryError(expected_actor, expected_seq, "kind", f"unknown kind {row.kind!r}")
    try:
        actual = entry_checksum(
            row.actor_id, row.seq, row.kind, row.type_tag, row.ref, row.message_id, row.payload
        )
    except (struct.error, OverflowError, UnicodeError, TypeError) as exc:
        # a damaged field no valid entry can hold (a negative seq or ref, say)
        raise CorruptEntryError(
            expected_actor, expected_seq, "checksum", f"a field cannot be framed: {exc}"
        ) from exc
    if actual != row.checksum:
        raise CorruptEntryError(
            expected_actor,
            expected_seq,
            "checksum",
            f"stored {row.checksum:#010x}, computed {actual:#010x}",
        )


def verified_rows(
    rows: Iterable[EntryRow], expected_actor: str, first_seq: int
) -> Iterator[EntryRow]:
    """[F7] ``rows``, each checked by ``verify_row`` at its position (``first_seq``, then
    one more each) before it is yielded: a damaged row raises its ``CorruptEntryError``
    when the iteration reaches it, after every row before it was yielded.

    The checksum of a batch is computed with the actor id's bytes and each type tag's
    frame bytes made once (a read is one actor's rows, a few tags); a row this does not
    accept is handed to ``verify_row``, which raises the error it always raised."""
    aid = expected_actor.encode()
    n_aid = len(aid)
    tags: dict[str, bytes] = {}
    kinds, head, u16, u32, crc = _KIND_CODE, _HEAD.pack, _U16.pack, _U32.pack, zlib.crc32
    seq = first_seq
    for row in rows:
        try:
            actor_id, at, kind, tag_text, ref, message_id, payload, checksum = (
                row.actor_id,
                row.seq,
                row.kind,
                row.type_tag,
                row.ref,
                row.message_id,
                row.payload,
                row.checksum,
            )
            tag = tags.get(tag_text)
            if tag is None:
                raw = tag_text.encode()
                tag = tags[tag_text] = u16(len(raw)) + raw
            if message_id is None:
                mid = _NO_MESSAGE_ID_BYTES
            else:
                mid_bytes = message_id.encode()
                mid = u16(len(mid_bytes)) + mid_bytes
            ok = (
                actor_id == expected_actor
                and at == seq
                and crc(
                    payload,
                    crc(
                        b"".join(
                            (
                                head(FRAME_VERSION, kinds[kind], at, ref, n_aid),
                                aid,
                                tag,
                                mid,
                                u32(len(payload)),
                            )
                        )
                    ),
                )
                == checksum
            )
        except Exception:  # a field no entry can hold: verify_row says which
            ok = False
        if not ok:
            verify_row(row, expected_actor, seq)  # raises the error it always raised
        yield row
        seq += 1


def snapshot_digest(
    actor_id: str,
    seq: int,
    handled_seq: int,
    type_tag: str,
    schema_version: int,
    data: bytes,
) -> bytes:
    """[F12] SHA-256 of the snapshot frame: its identity and position, then its bytes.

    Covering ``seq`` and ``handled_seq`` (not only the data) means a damaged position is
    detected too, instead of replaying from the wrong place.
    """
    aid = actor_id.encode()
    tag = type_tag.encode()
    import hashlib  # only for snapshots (its OpenSSL binding is slow to load)

    h = hashlib.sha256()
    h.update(struct.pack(">BH", FRAME_VERSION, len(aid)))
    h.update(aid)
    h.update(struct.pack(">QQIH", seq, handled_seq, schema_version, len(tag)))
    h.update(tag)
    h.update(struct.pack(">Q", len(data)))
    h.update(data)
    return h.digest()


def info_digest(info: SnapshotInfo, data: bytes) -> bytes:
    """The digest a snapshot with this metadata and these bytes must carry."""
    return snapshot_digest(
        info.actor_id, info.seq, info.handled_seq, info.type_tag, info.schema_version, data
    )


def log_start_checksum(actor_id: str, first_seq: int) -> int:
    """[F16] CRC-32 of a compacted log's start record: the first seq still stored."""
    a = actor_id.encode()
    return zlib.crc32(struct.pack(">BBQH", FRAME_VERSION, 0x80, first_seq, len(a)) + a)
