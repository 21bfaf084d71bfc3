"""[F13] The incarnation id of an actor's log: read back by recovery, so that the messages a
runtime logs for the actor carry it on (docs/FORMAT.md, "Idempotency keys")."""

from __future__ import annotations

from .._journal import codec as _codec
from .._journal.records import MessageRecord, decode_entry
from ..store import ActorRow, Store

__all__ = ["log_incarnation"]


async def log_incarnation(
    store: Store, actor: ActorRow | None, last_read: int, last_read_incarnation: str | None
) -> str | None:
    """The incarnation id the log's last message records (None: an empty log, or a last
    message logged before incarnations existed). ``last_read`` is the newest message seq
    recovery read (0: none) and ``last_read_incarnation`` what it records; if the log's last
    message is older than what recovery read (a snapshot covers it), that one entry is read
    and verified. Compaction always keeps it ([F16]).

    Raises:
        CorruptEntryError: that entry is damaged.
    """
    if actor is not None and actor.last_message_seq > last_read:
        seq = actor.last_message_seq
        rows = await store.read(actor.actor_id, after_seq=seq - 1, upto_seq=seq)
        if not rows:
            return None
        _codec.verify_row(rows[0], actor.actor_id, seq)
        rec = decode_entry(rows[0])
        return rec.incarnation if isinstance(rec, MessageRecord) else None
    return last_read_incarnation
