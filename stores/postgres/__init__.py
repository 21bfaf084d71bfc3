"""The shared store: PostgreSQL through an asyncpg pool, group commit, several runtimes.

Schema and guarantees mirror :mod:`actorlog.stores.sqlite` (``docs/FORMAT.md``, "PostgreSQL
schema"). Highlights:

* Appends from every actor that arrive while a commit is in flight share the next
  transaction: one ``INSERT ... SELECT FROM unnest(...)`` statement in autocommit mode, so one
  round trip and one commit per batch, whatever the number of rows.
* The conditional append is enforced *inside* the database by a ``BEFORE INSERT`` trigger:
  it locks the actor's ``actors`` row (``SELECT ... FOR UPDATE``) and rejects a row whose seq
  is not the actor's last seq + 1, then advances the summary columns. A racing writer in
  another process waits for that row lock, then sees the winner's seq and is rejected, so two
  runtimes can never interleave one actor's log. Rejections are SQLSTATE class 23 (integrity
  constraint violation); duplicate message ids hit a unique index, also class 23.
* Concurrent ``find_message`` calls (the runtime's duplicate check of every ``ask`` or
  ``send`` with a ``message_id``) share one ``SELECT`` per batch, as appends share one
  ``INSERT``.
* When a batch is rejected, its requests are retried one by one, so only the conflicting
  ones fail and the others still commit.
* The schema is created or migrated on :meth:`PostgresStore.open` inside one transaction
  that holds an advisory lock, so processes opening a new database at once do not race; the
  version lives in ``actorlog_meta`` (``format_version``).

Durability is the server's: a commit returns once PostgreSQL reports it durable
(``synchronous_commit``, by default ``on``).

Ownership across runtimes (leases with fencing tokens; schema
migration 2, ``docs/scaling.md``):

* ``leases(actor_id, owner, expires_at, token)``: a runtime takes an actor's lease if it is
  free or expired (:meth:`PostgresStore.acquire_lease`), which bumps the actor's fencing
  token; it renews it before it expires. Expiry is computed with the *database's* clock
  (``now()``), so runtimes' clocks may disagree; only their timers' rates matter.
* Every append of a lease holder carries its token (``entries.fence``; registered per actor
  with :meth:`PostgresStore.set_fence`, or ``append(..., fence=token)``); the append trigger,
  holding the actor's row lock, rejects a row whose token is not the actor's current one
  (SQLSTATE ``23AL1`` -> :class:`~actorlog.LeaseLostError`). Acquiring a lease takes the
  same row lock, so a takeover and a zombie's append are serialized: the zombie's append
  either commits before the new owner reads the log, or is rejected.
* ``inbox``: messages for an actor owned by another runtime wait here until its owner logs
  them (``NOTIFY actorlog_inbox`` wakes it; owners also poll). Once the step of such a
  message is durable, its owner announces it (:meth:`PostgresStore.notify_replies`,
  ``NOTIFY actorlog_reply``), which wakes the ``ask`` waiting on another runtime.
  Both channels share one listener connection per store, re-established after a drop.

Schema versions are counted apart from the log format (``actorlog_meta.schema_version``).

asyncpg runs on asyncio only.
"""

from __future__ import annotations

try:
    from .leases import INBOX_CHANNEL, REPLY_CHANNEL
    from .store import PostgresStore
except ModuleNotFoundError as exc:  # the optional driver
    if exc.name != "asyncpg":
        raise
    raise ModuleNotFoundError(
        "PostgresStore needs the asyncpg driver, which is not installed here: "
        "pip install 'actorlog[postgres]'",
        name="asyncpg",
    ) from None

__all__ = ["INBOX_CHANNEL", "REPLY_CHANNEL", "PostgresStore"]

PostgresStore.__module__ = __name__  # shown where it is imported from, as before the split
