"""The console's lifecycle writes: cancel an actor's running step, terminate it, delete it
(after a page naming what goes), and the list of deleted actors. Each goes through
:mod:`actorlog.ops.lifecycle`, the functions ``actorlog cancel``, ``terminate`` and
``delete`` use (the same rules, events and audit row), after the same checks as resolve and
fork (:mod:`.writes`: ``--allow-writes``, the token, CSRF, same origin).

On SQLite a runtime holding the file refuses the write with its lock message (HTTP 409), as
``actorlog cancel`` does; on PostgreSQL ``cancel`` and ``terminate`` reach the runtime that
owns the actor through its inbox, at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .. import ops
from .._durability import decisions as _decisions
from .._journal.errors import StoreLockedError
from ..ops import lifecycle as life
from ..store import Store
from . import common as _app
from .writes import Refused, _authorized_form, _refused, _text, _to_actor

#: the statuses of an actor that has ended (``delete`` needs ``yes`` for these, else ``force``)
ENDED = ("finished", "terminated")


@contextlib.asynccontextmanager
async def _writable(request: Request, what: str) -> AsyncIterator[Store]:
    """The store opened for writing, for one write; on SQLite a runtime's lock says so."""
    try:
        async with _app.writable(request) as store:
            yield store
    except StoreLockedError as exc:
        raise StoreLockedError(
            exc.path,
            f"{exc.holder}; on SQLite the console can {what} only offline. Stop that runtime "
            f"and {what} again, or call system.{what}(...) in that process. On PostgreSQL it "
            "works live",
        ) from None


#: what the console's cancel and terminate do, and what the actor's page then says: always,
#: and whether a runtime owns the actor now (a store with leases) or not
_COMMANDS: dict[str, tuple[Callable[..., Awaitable[object]], str, str, str]] = {
    "cancel": (
        life.cancel,
        "cancel of the running step requested. ",
        "The runtime that owns it cancels that step now (its tool call is recorded "
        "cancelled, a write tool's as in doubt).",
        "No runtime runs it now: the next runtime to resume its interrupted step cancels "
        "that step.",
    ),
    "terminate": (
        life.terminate,
        "terminated: it takes no more steps; its log stays for audit until deleted.",
        " Its owner (if one runs it) cancels a running step now.",
        "",
    ),
}


async def _command(request: Request, what: str) -> Response:
    """The console's cancel and terminate: one authorized form, the command over the store
    opened for writing, and the actor's page with what was done (``_COMMANDS``)."""
    command, done, live, offline = _COMMANDS[what]
    try:
        form = await _authorized_form(request)
    except Refused as exc:
        return _refused(request, exc)
    actor_id = _text(form, "id")
    async with _writable(request, what) as store:
        await command(store, actor_id, by=_text(form, "by") or None, reason=_text(form, "reason"))
        leases = store.capabilities.leases
    return _to_actor(actor_id, done + (live if leases else offline))


async def cancel(request: Request) -> Response:
    """Cancel the actor's running step (``ops.lifecycle.cancel``)."""
    return await _command(request, "cancel")


async def terminate(request: Request) -> Response:
    """End the actor for good (``ops.lifecycle.terminate``)."""
    return await _command(request, "terminate")


async def _delete_page(
    request: Request, actor_id: str, *, status_code: int = 200, message: str | None = None
) -> Response:
    store = _app.store_of(request)
    a = await ops.actor_status(store, actor_id)  # counts, not the whole history
    snapshots = await store.list_snapshots(actor_id)
    events = await store.read_events(actor_id)
    owner = None
    if store.capabilities.leases:
        held = [le for le in await ops.leases(store) if le.actor_id == actor_id and le.live]
        owner = held[0].owner if held else None
    return _app.show(
        request,
        "delete.html",
        status_code=status_code,
        a=a,
        ended=a.status in ENDED,
        entries=a.last_seq - a.first_seq + 1 if a.last_seq else 0,
        snapshots=len(snapshots),
        events=len(events),
        owner=owner,
        message=message,
        whoami=_decisions.whoami(),
    )


async def delete_page(request: Request) -> Response:
    """What a deletion of the actor removes, and the confirmation it needs."""
    return await _delete_page(request, _app.actor_id_param(request))


async def delete(request: Request) -> Response:
    """Delete after the confirmation page: ``confirm`` is ``yes`` (an ended actor) or
    ``force`` (one that has not ended), the CLI's ``--yes`` and ``--force``."""
    try:
        form = await _authorized_form(request)
    except Refused as exc:
        return _refused(request, exc)
    actor_id = _text(form, "id")
    confirm = _text(form, "confirm")
    async with _writable(request, "delete") as store:
        try:
            d = await life.delete(
                store,
                actor_id,
                yes=confirm == "yes",
                force=confirm == "force",
                by=_text(form, "by") or None,
                reason=_text(form, "reason"),
            )
        except life.DeleteRefusedError as exc:
            refused: str | None = _refusal(exc)
        else:
            refused = None
    if refused is not None:
        return await _delete_page(request, actor_id, status_code=409, message=refused)
    notice = (
        f"deleted {d.actor_id} ({d.actor_type}, {d.last_seq} entries); audit row "
        f"{d.audit_id} by {d.by}"
        + ("; it had not ended: its unfinished work is deleted with it" if d.forced else "")
    )
    return RedirectResponse("/deleted?" + urlencode({"notice": notice}), 303)


def _refusal(exc: life.DeleteRefusedError) -> str:
    """The refusal in the console's words (the CLI's names its flags)."""
    if exc.needs == "yes":
        return (
            f"refused, nothing deleted: actor {exc.actor_id!r} is {exc.status}; confirm "
            "that its log, snapshots and history go for good"
        )
    return (
        f"refused, nothing deleted: actor {exc.actor_id!r} is {exc.status}, not finished or "
        "terminated: deleting it loses its unfinished work. Terminate it first, or confirm "
        "a forced deletion"
    )


async def deleted(request: Request) -> Response:
    """The store's audit of deleted actors (``ops.lifecycle.deleted``), newest first."""
    gone = list(reversed(await life.deleted(_app.store_of(request))))
    return _app.show(request, "deleted.html", gone=gone, notice=request.query_params.get("notice"))
