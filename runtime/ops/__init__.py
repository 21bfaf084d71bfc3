"""The operator's view of a store: status, history, verify, resolve, fork, export.

Every function takes an open :class:`~actorlog.store.Store` and reads the log the way recovery
does, so what it reports is what a runtime would find. Only :func:`resolve` and :func:`fork`
write, and only through the store's conditional append, so they can never interleave with a
runtime's writes: if a runtime appends to the same actor first, they raise
``SequenceConflictError`` and write nothing.

::

    from actorlog import ops

    async with ops.opened("sqlite:///agents.db") as store:      # read-only
        for a in await ops.list_actors(store):
            print(a.actor_id, a.status, [i.intent_seq for i in a.in_doubt])
        page = await ops.list_actors_page(store, status="in_doubt", limit=50)  # many actors
        h = await ops.history(store, "run-42")
        report = await ops.verify(store)

    async with ops.opened("sqlite:///agents.db", read_only=False) as store:
        await ops.resolve(store, "run-42", 19, result="PAGE-991", reason="seen in PagerDuty")

Statuses (:attr:`ActorStatus.status`), most severe first:

* ``quarantined``: recovery would stop at damage in the log (checksum, seq chain, reference),
  or the last runtime to run it quarantined it (a ``quarantined`` event: non-determinism, a
  class it did not know) and it has not recovered since.
* ``stopped``: the last runtime to run it stopped it (a ``stopped`` event: a conflicting
  writer, the store unavailable) and it has not recovered since.

The word is the one the runtime's event and ``system.status`` use (before 0.1 both runtime
stops were shown as ``failed``).

* ``in_doubt``: its unfinished step has a tool call that may or may not have happened and that
  only an operator can settle (:func:`resolve`).
* ``running``: it has messages logged but not yet handled (a runtime is handling them, or
  will recover them when it next starts).
* ``idle``: nothing to do.
* ``finished``: it stopped itself (``ctx.stop``); it takes no more steps.
* ``terminated``: an operator terminated it (:func:`terminate`); it takes no more steps.

(:data:`actorlog.ops.listing.STATUSES` lists them.) The lifecycle writes :func:`cancel`,
:func:`terminate` and :func:`delete`, and :func:`deleted` (the store's audit of deletions),
are :mod:`actorlog.ops.lifecycle`'s, exported here too.
"""

from __future__ import annotations

from .compaction import CompactResult, compact
from .history import history, iter_history
from .lifecycle import Deleted, DeleteRefusedError, cancel, delete, deleted, terminate
from .listing import list_actors_page, waiting_intents
from .models import (
    NEEDS_OPERATOR,
    ActorPage,
    ActorStatus,
    Call,
    Decision,
    Effect,
    EntryView,
    Event,
    ExternalEffect,
    Finding,
    ForkRefusedError,
    ForkResult,
    History,
    HistoryItem,
    InDoubtIntent,
    SnapshotView,
    Step,
    VerifyReport,
    to_json,
)
from .reads import actor_status, export, leases, list_actors, opened, show
from .restart import restart
from .rulings import calls_needing_ruling, waiting_rulings
from .timers import timer_view, timers
from .verify import Progress, verify
from .writes import fork, fork_effects, resolve

__all__ = [
    "ActorPage",
    "ActorStatus",
    "Call",
    "CompactResult",
    "Decision",
    "DeleteRefusedError",
    "Deleted",
    "Effect",
    "EntryView",
    "Event",
    "ExternalEffect",
    "Finding",
    "ForkRefusedError",
    "ForkResult",
    "History",
    "HistoryItem",
    "InDoubtIntent",
    "NEEDS_OPERATOR",
    "Progress",
    "SnapshotView",
    "Step",
    "VerifyReport",
    "actor_status",
    "cancel",
    "compact",
    "delete",
    "deleted",
    "export",
    "fork",
    "fork_effects",
    "calls_needing_ruling",
    "history",
    "iter_history",
    "leases",
    "list_actors",
    "list_actors_page",
    "opened",
    "resolve",
    "restart",
    "show",
    "terminate",
    "timer_view",
    "timers",
    "to_json",
    "verify",
    "waiting_intents",
    "waiting_rulings",
]

for _name in __all__:  # show the public classes as actorlog.ops.X, where users import them
    if isinstance(_obj := globals()[_name], type):
        _obj.__module__ = __name__
del _name, _obj
