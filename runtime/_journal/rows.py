"""The rows a store keeps, and the type-checked builders that make them from column values
(public through :mod:`actorlog.store`, which re-exports everything here)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import cast

import attrs

from .errors import CorruptEntryError

__all__ = [
    "ACTOR_COLUMNS",
    "ENTRY_COLUMNS",
    "EVENT_COLUMNS",
    "SNAPSHOT_INFO_COLUMNS",
    "ActorRow",
    "EntryRow",
    "EventRow",
    "SnapshotInfo",
    "SnapshotRow",
    "actor_row",
    "entry_row",
    "event_row",
    "snapshot_data",
    "snapshot_info",
]


@attrs.frozen(slots=True)
class EntryRow:
    """One log entry as stored.

    Attributes:
        actor_id: the actor whose log this is.
        seq: position in the actor's log, 1, 2, 3, ... without gaps.
        kind: one of :data:`KINDS`.
        type_tag: message class tag (message, step), tool name (intent, result),
            effect name (effect) or decision action (decision).
        ref: the seq this entry refers to: for ``step``/``intent``/``effect`` the message seq
            of the step; for ``result``/``decision`` the intent seq. ``0`` for messages.
        message_id: the caller's message id (``message`` entries only), unique per actor.
        payload: the encoded body (UTF-8 JSON, see FORMAT.md).
        checksum: CRC-32 over the frame of all fields above (FORMAT.md [F6]).
    """

    actor_id: str
    seq: int
    kind: str
    type_tag: str
    ref: int
    message_id: str | None
    payload: bytes
    checksum: int


@attrs.frozen(slots=True)
class SnapshotInfo:
    """A snapshot's metadata, without its bytes.

    Attributes:
        actor_id: the actor.
        seq: the log seq the snapshot covers (every entry <= seq is reflected in it).
        handled_seq: the seq of the last message whose step is reflected in it.
        type_tag: the state class tag.
        schema_version: the state class's schema version.
        digest: SHA-256 of the snapshot frame, which covers the snapshot's identity and
            position as well as ``data`` (32 bytes; FORMAT.md [F12]).
        size: ``len(data)``.
        created_at: Unix time in seconds when it was written.
        damage: None, or why a column of the stored row failed its type check
            (:func:`snapshot_info`): the damaged fields then hold placeholders (``-1``,
            ``""``, ``b""``) that fail the snapshot's digest check, so recovery rejects it
            and falls back to an older one.
    """

    actor_id: str
    seq: int
    handled_seq: int
    type_tag: str
    schema_version: int
    digest: bytes
    size: int
    created_at: float
    damage: str | None = None


@attrs.frozen(slots=True)
class SnapshotRow:
    """A whole snapshot: metadata and the encoded state."""

    info: SnapshotInfo
    data: bytes


@attrs.frozen(slots=True)
class ActorRow:
    """One actor as the store knows it.

    Attributes:
        actor_id: the actor's stable id.
        actor_type: the registered class tag.
        last_seq: the last seq in its log (0 if empty).
        last_message_seq: the seq of the last ``message`` entry (0 if none).
        handled_seq: the highest ``ref`` of its ``step`` entries: the last message handled.
        first_seq: the first seq still stored (1 unless compacted; 0 if empty).
        created_at: Unix time of registration.
        damage: None, or why a column of the stored row failed its type check (only in
            :meth:`Store.list_actors`, which goes on with the other actors; ``get_actor``
            raises instead). The damaged fields then hold placeholders (``0``, ``""``):
            trust none of them.
        created: True only on the row :meth:`Store.register_actor` returns when that call
            inserted it: the store held no row, log, snapshot or event of this actor, so the
            runtime starts it without recovery's reads. A store may always leave it False
            (the actor is then recovered, finding nothing). Not compared (``==``).
    """

    actor_id: str
    actor_type: str
    last_seq: int
    last_message_seq: int
    handled_seq: int
    first_seq: int
    created_at: float
    damage: str | None = None
    created: bool = attrs.field(default=False, eq=False)


@attrs.frozen(slots=True)
class EventRow:
    """An operator-history event (recoveries, corruption found, quarantines). Not part of
    the checksummed log: it is an audit trail about the log.

    A stored event whose columns fail their type check is returned with ``kind``
    ``"damaged"``, ``damage`` set and ``detail`` ``{"error": <why>}`` (:func:`event_row`)."""

    actor_id: str
    at: float
    kind: str
    detail: str  # JSON object
    damage: str | None = None


# -- type-checked rows ---------------------------------------------------------------------
#
# Every column a store reads is type-checked here, once for every store. A wrong type is
# damage (a bit flipped in a SQLite record header turns a BLOB into TEXT or an INTEGER into
# a REAL without changing the record's length), never an internal TypeError later on.

#: The columns of an entry, in the order :func:`entry_row` takes their values.
ENTRY_COLUMNS: tuple[str, ...] = (
    "actor_id",
    "seq",
    "kind",
    "type_tag",
    "ref",
    "message_id",
    "payload",
    "checksum",
)
#: The columns of an actor's summary row, in the order :func:`actor_row` takes them.
ACTOR_COLUMNS: tuple[str, ...] = (
    "actor_id",
    "actor_type",
    "last_seq",
    "last_message_seq",
    "handled_seq",
    "first_seq",
    "created_at",
)
#: A snapshot's metadata columns, in the order :func:`snapshot_info` takes them (the
#: ``data`` column is apart: :func:`snapshot_data`).
SNAPSHOT_INFO_COLUMNS: tuple[str, ...] = (
    "actor_id",
    "seq",
    "handled_seq",
    "type_tag",
    "schema_version",
    "digest",
    "size",
    "created_at",
)
#: The columns of an event, in the order :func:`event_row` takes them.
EVENT_COLUMNS: tuple[str, ...] = ("actor_id", "at", "kind", "detail")


def _describe(value: object) -> str:
    return "NULL" if value is None else type(value).__name__


def _int(value: object) -> int | None:
    return value if type(value) is int else None


def _str(value: object) -> str | None:
    return value if type(value) is str else None


def _float(value: object) -> float | None:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    return None


def _bytes(value: object) -> bytes | None:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return None


def _problems(table: str, names: Sequence[str], values: Sequence[object], want: str) -> list[str]:
    out = []
    if len(values) < len(names):
        return [f"{table} row has {len(values)} columns, not {len(names)}"]
    checks = {"i": _int, "s": _str, "f": _float, "b": _bytes}
    for name, value, w in zip(names, values, want, strict=False):
        if w == "S":  # text or NULL
            ok = value is None or _str(value) is not None
            expected = "str or NULL"
        else:
            ok = checks[w](value) is not None
            expected = {"i": "int", "s": "str", "f": "float", "b": "bytes"}[w]
        if not ok:
            out.append(f"{table}.{name} holds {_describe(value)}, not {expected}")
    return out


def entry_row(values: Sequence[object], *, actor_id: str, seq: int = 0) -> EntryRow:
    """An :class:`EntryRow` from its column values (in the order of its fields), each
    type-checked.

    Args:
        values: ``actor_id, seq, kind, type_tag, ref, message_id, payload, checksum``.
        actor_id: the actor the read asked for (named in the error).
        seq: the seq this row should have (named in the error if its own ``seq`` column is
            damaged; for a read in seq order, the previous row's seq + 1).

    Raises:
        CorruptEntryError: a column has the wrong type (check ``"column type"``).
    """
    v = values
    if (  # every column of the type it must have (the common case): no per-column checks
        len(v) == 8
        and type(v[0]) is str
        and type(v[1]) is int
        and type(v[2]) is str
        and type(v[3]) is str
        and type(v[4]) is int
        and (v[5] is None or type(v[5]) is str)
        and type(v[6]) is bytes
        and type(v[7]) is int
    ):
        return EntryRow(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])
    problems = _problems("entries", ENTRY_COLUMNS, values, "sissiSbi")
    if problems:
        got = values[1] if len(values) > 1 else None
        if type(got) is int:
            seq = got
        elif type(got) is float and got.is_integer():
            seq = int(got)
        raise CorruptEntryError(actor_id, seq, "column type", "; ".join(problems))
    return EntryRow(
        cast(str, v[0]),
        cast(int, v[1]),
        cast(str, v[2]),
        cast(str, v[3]),
        cast(int, v[4]),
        cast("str | None", v[5]),
        _bytes(v[6]) or b"",
        cast(int, v[7]),
    )


def actor_row(values: Sequence[object], *, lenient: bool = False) -> ActorRow:
    """An :class:`ActorRow` from its column values (in the order of its fields), each
    type-checked.

    Raises:
        CorruptEntryError: a column has the wrong type (seq 0, check ``"column type"``;
            the detail names the column). With ``lenient`` (listings) nothing is raised: the
            row comes back with ``damage`` set and placeholders in the damaged fields.
    """
    problems = _problems("actors", ACTOR_COLUMNS, values, "ssiiiif")
    v = list(values) + [None] * (len(ACTOR_COLUMNS) - len(values))
    if not problems:
        return ActorRow(
            cast(str, v[0]),
            cast(str, v[1]),
            cast(int, v[2]),
            cast(int, v[3]),
            cast(int, v[4]),
            cast(int, v[5]),
            _float(v[6]) or 0.0,
        )
    actor_id = _name(v[0])
    err = CorruptEntryError(
        actor_id, 0, "column type", "the actor's summary row: " + "; ".join(problems)
    )
    if not lenient:
        raise err
    return ActorRow(
        actor_id,
        _str(v[1]) or "",
        _int(v[2]) or 0,
        _int(v[3]) or 0,
        _int(v[4]) or 0,
        _int(v[5]) or 0,
        _float(v[6]) or 0.0,
        damage=str(err),
    )


def snapshot_info(values: Sequence[object], *, actor_id: str) -> SnapshotInfo:
    """A :class:`SnapshotInfo` from its column values (in the order of its fields), each
    type-checked. Never raises: a damaged row comes back with ``damage`` set and placeholders
    that fail the digest check (so recovery falls back to an older snapshot)."""
    problems = _problems("snapshots", SNAPSHOT_INFO_COLUMNS, values, "siisibif")
    v = list(values) + [None] * (len(SNAPSHOT_INFO_COLUMNS) - len(values))
    if not problems:
        return SnapshotInfo(
            cast(str, v[0]),
            cast(int, v[1]),
            cast(int, v[2]),
            cast(str, v[3]),
            cast(int, v[4]),
            _bytes(v[5]) or b"",
            cast(int, v[6]),
            _float(v[7]) or 0.0,
        )
    seq = _int(v[1])
    err = CorruptEntryError(
        actor_id, seq if seq is not None else -1, "column type", "snapshot: " + "; ".join(problems)
    )
    handled = _int(v[2])
    version = _int(v[4])
    size = _int(v[6])
    return SnapshotInfo(
        _str(v[0]) or actor_id,
        seq if seq is not None else -1,
        handled if handled is not None else -1,
        _str(v[3]) or "",
        version if version is not None else -1,
        _bytes(v[5]) or b"",
        size if size is not None else -1,
        _float(v[7]) or 0.0,
        damage=str(err),
    )


def snapshot_data(info: SnapshotInfo, value: object) -> SnapshotRow:
    """A :class:`SnapshotRow` from checked metadata and the ``data`` column: data of the
    wrong type is marked as damage (empty data fails the size and digest checks)."""
    data = _bytes(value)
    if data is not None:
        return SnapshotRow(info=info, data=data)
    why = f"snapshots.data holds {_describe(value)}, not bytes"
    damage = f"{info.damage}; {why}" if info.damage else why
    return SnapshotRow(info=attrs.evolve(info, damage=damage), data=b"")


def event_row(values: Sequence[object], *, actor_id: str) -> EventRow:
    """An :class:`EventRow` from ``actor_id, at, kind, detail``, each type-checked. Never
    raises: a damaged event comes back as kind ``"damaged"`` with ``damage`` set."""
    problems = _problems("events", EVENT_COLUMNS, values, "sfss")
    v = list(values)
    if not problems:
        return EventRow(cast(str, v[0]), _float(v[1]) or 0.0, cast(str, v[2]), cast(str, v[3]))
    why = "; ".join(problems)
    at = _float(v[1]) if len(v) > 1 else None
    return EventRow(actor_id, at or 0.0, "damaged", json.dumps({"error": why}), damage=why)


def _name(value: object) -> str:
    """An actor id for an error message, whatever the damaged column holds."""
    if type(value) is str:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return repr(value)
