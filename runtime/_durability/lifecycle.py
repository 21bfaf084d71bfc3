"""How an actor ends: finished (``ctx.stop()``), cancelled steps, terminated, deleted.

* **Finish** is a ``finish`` *effect* of the step that called ``ctx.stop()`` (FORMAT.md
  [F5]): written with the step, checksummed and replayed like every effect, so no new entry
  kind (and no format change) is needed. A ``finished`` event in the operator history
  says so without reading the log; it is written once the step is durable, and again by a
  recovery that finds the effect without the event (a crash between the two).
* **Cancel** cuts the running step short: its handler's scope is cancelled, the calls it
  was running are settled ``cancelled`` (a write tool's as in doubt), and the step is
  recorded failed with ``StepCancelledError``. A request from another process is a
  ``cancel_requested`` event (plus, with leases, an inbox command waking the owner).
* **Terminate** is a ``terminated`` event: no more steps; what is queued is answered with
  a recorded ``ActorFinishedError``.
* **Delete** removes the log through the store's optional ``delete_actor`` and leaves a
  store-level audit row (``AuditStore``).

:class:`Lifecycle` is the operator API the ``ActorSystem`` mixes in.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from .._journal import codec as _codec, records as _records
from .._journal.entrykinds import EntryKind, EventKind
from .._journal.errors import ActorNotFoundError, ConfigurationError, StepCancelledError
from .._journal.records import ErrorInfo, StepRecord
from .._tracing import traceends as _traceends
from .._tracing.telemetry import ATTR
from ..store import AuditRow, AuditStore, EventRow, Store
from .mailbox import Reply, settle

if TYPE_CHECKING:
    from .wal import Journal

__all__ = [
    "COMMAND_TAGS",
    "DELETE_TAG",
    "Endable",
    "Lifecycle",
    "cancel_offline",
    "cancelled_call",
    "command",
    "delete_actor",
    "ended",
    "error_info",
    "finished_info",
    "log_refused",
    "note",
    "pending_cancel",
    "refuse",
    "refused_step",
    "terminate_offline",
]

#: type tags of operator commands sent through a leased store's inbox (never messages)
CANCEL_TAG = "actorlog.cancel"
TERMINATE_TAG = "actorlog.terminate"
#: the actor was deleted: its owner drops its cell and lets go of its lease
DELETE_TAG = "actorlog.delete"
COMMAND_TAGS = (CANCEL_TAG, TERMINATE_TAG)


class Endable(Protocol):
    """What ending, cancelling and refusing need of a cell (``Cell``)."""

    @property
    def actor_id(self) -> str: ...

    store: Store
    journal: Journal
    status: str
    handled_seq: int
    waiters: dict[int, list[Reply]]
    #: (``finished`` | ``terminated``, reason) once the actor ended
    ended: tuple[str, str] | None
    #: the running step's cancel scope (None between steps)
    step_scope: anyio.CancelScope | None
    #: a cancel request (its detail) for the next resumed step
    cancel_pending: dict[str, Any] | None
    done: anyio.Event
    #: [F13] the incarnation id of the log
    incarnation: str | None

    def outcome(self, seq: int, step: StepRecord) -> tuple[Any, BaseException | None]: ...

    def close(self) -> None: ...


def cancel_step(cell: Endable, *, reason: str, by: str) -> bool:
    """Cancel the running step (an operator's cancel); False if none runs."""
    if cell.step_scope is None:
        return False
    cell.cancel_pending = {"reason": reason, "by": by}
    cell.step_scope.cancel()
    return True


def end_cell(cell: Endable, *, reason: str, by: str) -> None:
    """Terminate a loaded cell (a local ``terminate``, or one through the inbox): no more
    steps, the running one cancelled, and its status says so (``system.status``)."""
    cell.ended = ("terminated", reason)
    cancel_step(cell, reason=reason or "terminated", by=by)
    if cell.status not in ("quarantined", "stopped", "passivated"):
        cell.status = "terminated"


def error_info(exc: BaseException) -> ErrorInfo:
    """How a step records its error: a cancel with the operator's reason as its message."""
    if isinstance(exc, StepCancelledError):
        return ErrorInfo("StepCancelledError", exc.message)
    return ErrorInfo.of(exc)


def finished_info(how: str, reason: str) -> ErrorInfo:
    """The error a refused message's step records (``_mailbox.step_outcome`` reads it)."""
    return ErrorInfo("ActorFinishedError", f"{how}: {reason}" if reason else how)


def refused_step(step: StepRecord, effects: int) -> bool:
    """A recorded step that refused its message because the actor had ended (``refuse``,
    ``log_refused``): its handler never ran, so replay must not run it. Told by its form:
    error ``ActorFinishedError`` whose message is exactly ``finished_info``'s (``finished``
    or ``terminated``, then ``: reason``; a handler's own ``ActorFinishedError`` reads
    ``actor '...' is ...``), no span and no effects."""
    err = step.error
    if step.ok or err is None or err.type != "ActorFinishedError":
        return False
    if step.span is not None or effects:
        return False
    return any(
        err.message == how or err.message.startswith(f"{how}: ")
        for how in ("finished", "terminated")
    )


def _detail(ev: EventRow) -> dict[str, Any]:
    try:
        value = json.loads(ev.detail)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def ended(events: Iterable[EventRow]) -> tuple[str, str] | None:
    """(``finished`` | ``terminated``, reason) if the history says the actor ended."""
    found = None
    for ev in events:
        if ev.damage is None and ev.kind in (EventKind.FINISHED, EventKind.TERMINATED):
            found = (str(ev.kind), str(_detail(ev).get("reason", "")))
    return found


def pending_cancel(events: Iterable[EventRow]) -> dict[str, Any] | None:
    """The newest ``cancel_requested`` event's detail if no step was cancelled after it."""
    found = None
    for ev in events:
        if ev.damage is not None:
            continue
        if ev.kind == EventKind.CANCEL_REQUESTED:
            found = _detail(ev)
        elif ev.kind == EventKind.CANCELLED:
            found = None
    return found


def cancelled_call(effects: dict[str, tuple[str, str]]) -> Any:
    """The error recorded for a call an operator's cancel cut short, by the tool's effect:
    a read tool is simply cancelled; a write tool is in doubt (it may have happened)."""

    def error(name: str) -> ErrorInfo:
        effect, policy = effects.get(name, ("write", ""))
        if effect == "read":
            return ErrorInfo("StepCancelledError", "cancelled by an operator before it returned")
        return ErrorInfo(
            "StepCancelledError",
            "cancelled by an operator before it returned: in doubt, it may or may not have "
            f"taken effect (a write tool, in-doubt policy {policy or 'escalate'}); check "
            "before doing it again",
        )

    return error


async def note(store: Store, actor_id: str, kind: str, detail: dict[str, Any]) -> None:
    """Record an operator-history event, awaited; a store failure is not fatal."""
    try:
        await store.record_event(actor_id, kind, json.dumps(detail, default=str))
    except Exception:
        pass


async def refuse(cell: Endable, env: Any) -> None:
    """A message logged before the actor ended: its step records ``ActorFinishedError``
    (its handler does not run), so its ``ask`` gets that error and it is not pending."""
    assert cell.ended is not None
    how, reason = cell.ended
    cell.journal.write(
        EntryKind.STEP,
        env.type_tag,
        env.seq,
        _records.step_payload(error=finished_info(how, reason)),
    )
    # decoded right after the write (the flush empties the journal's buffer)
    step = cell.journal.last_record()
    assert isinstance(step, StepRecord)
    cell.handled_seq = env.seq
    if env.seq in cell.waiters:
        await cell.journal.flush()
        value, error = cell.outcome(env.seq, step)
        settle(cell.waiters, env.seq, value, error)


async def log_refused(
    cell: Endable, tag: str, body: Any, message_id: str, sender: str | None
) -> None:
    """A message from another runtime (the inbox) to an ended actor: logged with its refused
    step, so that its remote ``ask`` reads ``ActorFinishedError`` from the log."""
    assert cell.ended is not None
    if await cell.store.find_message(cell.actor_id, message_id) is not None:
        return
    seq = cell.journal.write(
        EntryKind.MESSAGE,
        tag,
        0,
        _records.message_payload(body, sender=sender, trace=None, incarnation=cell.incarnation),
        message_id=message_id,
    )
    how, reason = cell.ended
    cell.journal.write(
        EntryKind.STEP, tag, seq, _records.step_payload(error=finished_info(how, reason))
    )
    cell.handled_seq = seq
    await cell.journal.flush()


class _SystemParts(Protocol):
    store: Store
    _cells: Any

    def _check_open(self) -> Any: ...


class Lifecycle:
    """The operator's lifecycle calls on an ``ActorSystem`` (mixed in)."""

    async def cancel(self: _SystemParts, actor_id: str, *, reason: str = "", by: str = "") -> bool:
        """Cancel the actor's running step, if it runs here now. The running tool call is
        cancelled (recorded cancelled; a write tool's as in doubt), and the step is
        recorded failed: its ``ask`` raises ``StepCancelledError``. Returns False if no
        step was running here (the request is then recorded, and a runtime that resumes
        an interrupted step of this actor cancels it)."""
        _codec.validate_actor_id(actor_id)
        _codec.validate_text(by, "by")
        _codec.validate_text(reason, "reason")
        with _traceends.lifecycle_span("cancel", actor_id, by, reason) as span:
            cell = self._cells.get(actor_id)
            if cell is not None and cancel_step(cell, reason=reason, by=by):
                return True
            span.set_attribute(ATTR.LIFECYCLE_REQUESTED, True)
            detail = {"by": by, "reason": reason}
            await note(self.store, actor_id, EventKind.CANCEL_REQUESTED, detail)
            if cell is None:  # owned by another runtime (or by none): through the inbox
                await _wake_owner(self.store, actor_id, CANCEL_TAG, detail)
            return False

    async def terminate(
        self: _SystemParts, actor_id: str, *, reason: str = "", by: str = ""
    ) -> None:
        """End the actor for good: a running step is cancelled, no more steps run, and
        every message gets ``ActorFinishedError`` (queued ones with a recorded step). The
        log stays for audit. Recorded as a ``terminated`` event before anything else."""
        _codec.validate_actor_id(actor_id)
        _codec.validate_text(by, "by")
        _codec.validate_text(reason, "reason")
        with _traceends.lifecycle_span("terminate", actor_id, by, reason):
            if await self.store.get_actor(actor_id) is None:
                raise ActorNotFoundError(f"actor {actor_id!r} is not in the store")
            detail = {"by": by, "reason": reason, "at": time.time()}
            await self.store.record_event(actor_id, EventKind.TERMINATED, json.dumps(detail))
        cell = self._cells.get(actor_id)
        if cell is not None:
            end_cell(cell, reason=reason, by=by)
        else:  # owned by another runtime (or by none): its owner gets it through the inbox
            await _wake_owner(self.store, actor_id, TERMINATE_TAG, detail)

    async def delete(
        self: _SystemParts, actor_id: str, *, by: str = "", reason: str = "", force: bool = False
    ) -> AuditRow:
        """Delete the actor's log, snapshots and history from the store, leaving a
        store-level audit row. Refused while it is loaded here and not ended, and (unless
        ``force``) for an actor that has not finished or been terminated."""
        _codec.validate_actor_id(actor_id)
        _codec.validate_text(by, "by")
        _codec.validate_text(reason, "reason")
        cell = self._cells.get(actor_id)
        if cell is not None and cell.ended is None and not cell.done.is_set():
            raise ConfigurationError(
                f"actor {actor_id!r} is running in this system: terminate it first"
            )
        if cell is not None and cell.step_scope is not None:
            raise ConfigurationError(f"actor {actor_id!r} is in a step: wait for it to end")
        audit = await delete_actor(self.store, actor_id, by=by, reason=reason, force=force)
        if cell is not None:
            cell.close()
            await cell.done.wait()
            if self._cells.get(actor_id) is cell:
                del self._cells[actor_id]
        return audit


def _audit_store(store: Store) -> AuditStore:
    if not isinstance(store, AuditStore):
        raise ConfigurationError(
            f"{type(store).__name__} cannot delete actors (it lacks delete_actor/read_audit)"
        )
    return store


async def delete_actor(
    store: Store, actor_id: str, *, by: str, reason: str, force: bool
) -> AuditRow:
    """Offline or live: check the actor may go, then delete it with its audit row."""
    with _traceends.lifecycle_span("delete", actor_id, by, reason):
        return await _delete_actor(store, actor_id, by=by, reason=reason, force=force)


async def _delete_actor(
    store: Store, actor_id: str, *, by: str, reason: str, force: bool
) -> AuditRow:
    audit = _audit_store(store)
    row = await store.get_actor(actor_id)
    if row is None:
        raise ActorNotFoundError(f"actor {actor_id!r} is not in the store")
    events = await store.read_events(actor_id)
    end = ended(events)
    if end is None and not force:
        raise ConfigurationError(
            f"actor {actor_id!r} has not finished and was not terminated: deleting it loses "
            "its work; terminate it first, or force (--force) to delete it anyway"
        )
    detail = {
        "by": by,
        "reason": reason,
        "actor_type": row.actor_type,
        "last_seq": row.last_seq,
        "ended": None if end is None else end[0],
        "forced": end is None,
    }
    with anyio.CancelScope(shield=True):
        done = await audit.delete_actor(actor_id, json.dumps(detail))
        # after the delete (which empties the actor's inbox): the owner, if a runtime holds
        # its lease, drops its cell and the lease, so that an id registered again from seq
        # 1 is never written by the old cell (its refusals would go into the new log)
        await _wake_owner(store, actor_id, DELETE_TAG, {"by": by, "reason": reason})
    return done


async def terminate_offline(store: Store, actor_id: str, *, by: str, reason: str) -> None:
    """``actorlog terminate``: the event (and, with leases, a command waking the owner)."""
    with _traceends.lifecycle_span("terminate", actor_id, by, reason):
        if await store.get_actor(actor_id) is None:
            raise ActorNotFoundError(f"actor {actor_id!r} is not in the store")
        detail = {"by": by, "reason": reason, "at": time.time()}
        await store.record_event(actor_id, EventKind.TERMINATED, json.dumps(detail))
        await _wake_owner(store, actor_id, TERMINATE_TAG, detail)


async def cancel_offline(store: Store, actor_id: str, *, by: str, reason: str) -> None:
    """``actorlog cancel``: a ``cancel_requested`` event for the owner or the next start."""
    with _traceends.lifecycle_span("cancel", actor_id, by, reason) as span:
        if await store.get_actor(actor_id) is None:
            raise ActorNotFoundError(f"actor {actor_id!r} is not in the store")
        span.set_attribute(ATTR.LIFECYCLE_REQUESTED, True)
        detail = {"by": by, "reason": reason, "at": time.time()}
        await store.record_event(actor_id, EventKind.CANCEL_REQUESTED, json.dumps(detail))
        await _wake_owner(store, actor_id, CANCEL_TAG, detail)


async def _wake_owner(store: Store, actor_id: str, tag: str, detail: dict[str, Any]) -> None:
    if not store.capabilities.leases:
        return
    inbox_put = getattr(store, "inbox_put", None)
    if inbox_put is not None:
        mid = f"{tag}-{_codec.new_message_id()}"
        await inbox_put(actor_id, mid, tag, json.dumps(detail), None)


def command(cell: Endable, tag: str, body: str) -> None:
    """An operator command that came through the inbox (``_ownership._drain``)."""
    try:
        detail = json.loads(body)
    except ValueError:
        detail = {}
    if not isinstance(detail, dict):
        detail = {}
    reason, by = str(detail.get("reason", "")), str(detail.get("by", ""))
    if tag == TERMINATE_TAG:
        end_cell(cell, reason=reason, by=by)
    elif not cancel_step(cell, reason=reason, by=by):
        cell.cancel_pending = detail
