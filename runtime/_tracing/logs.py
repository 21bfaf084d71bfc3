"""The stdlib loggers actorlog writes to (docs/operators.md, "Logging").

Quiet by default: ``actorlog/__init__`` puts a ``NullHandler`` on ``actorlog``; an
application that configures logging (``logging.basicConfig(level=logging.INFO)``) sees:

* ``actorlog.recovery`` INFO: one line per actor recovered (what was read and replayed);
* ``actorlog.in_doubt`` WARNING: a tool call escalated to an operator (with the command
  that resolves it);
* ``actorlog.quarantine`` ERROR: an actor quarantined (why, and how to recover);
  INFO when an operator restarts one;
* ``actorlog.ownership`` WARNING: a runtime lost an actor's lease (``_cluster/leases.py``).
"""

from __future__ import annotations

import logging

__all__ = ["in_doubt", "quarantine", "recovery", "shown_store", "stopped"]

recovery = logging.getLogger("actorlog.recovery")
in_doubt = logging.getLogger("actorlog.in_doubt")
quarantine = logging.getLogger("actorlog.quarantine")


def shown_store(store: object) -> str:
    """The store's URL as error messages and logs show it: without a password."""
    from urllib.parse import urlsplit, urlunsplit  # (only to log an in-doubt call)

    try:
        url = str(getattr(store, "url", "STORE"))
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    except Exception:
        return "STORE"


def stopped(actor_id: str, actor_type: str, status: str, exc: BaseException) -> None:
    """An actor quarantined (ERROR) or stopped (WARNING)."""
    quarantine.log(
        logging.ERROR if status == "quarantined" else logging.WARNING,
        "actor %s (%s) %s: %s: %s",
        actor_id,
        actor_type,
        status,
        type(exc).__qualname__,
        exc,
    )
