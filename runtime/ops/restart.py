"""``restart``: mark a quarantined actor restarted, offline (``actorlog restart``)."""

from __future__ import annotations

import json

from .._durability.decisions import restarted_detail
from .._journal import codec as _codec
from .._journal.errors import ConfigurationError
from .._journal.records import EventKind
from .._tracing import traceends as _traceends
from ..store import Store
from .reads import _actor_row, _events, _failure, _status
from .verify import refuse_damaged

__all__ = ["restart"]


async def restart(store: Store, actor_id: str, *, by: str | None = None, reason: str = "") -> str:
    """Record that an operator restarts a quarantined actor (a ``restarted`` event, with who
    and why), once the cause is fixed (the handler's code, docs/upgrading.md). Its status
    is no longer ``quarantined``; the next runtime to start it (``spawn``, a message, or on
    start if it has unfinished work) recovers it with the code it runs, and quarantines it
    again if that still fails. A runtime running right now keeps its quarantine: call
    ``ActorSystem.restart`` there. Returns the error it was quarantined with.

    Raises:
        ConfigurationError: it is not quarantined, or its log is damaged (an entry or its
            summary row, as ``verify`` finds it: a restart cannot help).
        ActorNotFoundError: no such actor.
    """
    _codec.validate_optional_text(by, "by")
    _codec.validate_text(reason, "reason")
    row = await _actor_row(store, actor_id)
    status = await _status(store, row)
    if status.status != "quarantined":
        raise ConfigurationError(
            f"actor {actor_id!r} is not quarantined ({status.status}): nothing to restart"
        )
    failure = _failure(await _events(store, actor_id))
    if failure is None:
        raise ConfigurationError(
            f"actor {actor_id!r} cannot recover from its log: {status.problem}. A restart "
            "would not help: run 'actorlog verify' and deal with the damage first"
        )
    await refuse_damaged(store, actor_id, "restart")
    problem = status.problem or failure[1]
    detail = restarted_detail(by, reason, problem)
    with _traceends.lifecycle_span("restart", actor_id, detail["by"], reason):
        await store.record_event(actor_id, EventKind.RESTARTED, json.dumps(detail))
    return problem
