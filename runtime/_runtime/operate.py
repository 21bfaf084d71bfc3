"""The operator's side of a live ``ActorSystem`` (mixed in): why an actor stopped, what its
last recovery did, its in-doubt calls and their resolution, restarting a quarantined actor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import anyio

from .._core import restart as _restart
from .._core.cell import Cell
from .._core.recovery import RecoveryReport
from .._durability import decisions as _decisions
from .._durability.rulings import rule_live
from .._effects.ref import ActorRef
from .._effects.registry import Registry
from .._journal import codec as _codec
from .._journal.errors import ActorNotFoundError, ActorQuarantinedError
from ..store import Store

if TYPE_CHECKING:
    from .._cluster.ownership import Ownership

__all__ = ["Operations"]


class _Parts(Protocol):
    store: Store
    registry: Registry
    _ownership: Ownership | None
    _cells: dict[str, Cell]
    _quarantined: dict[str, BaseException]

    async def spawn(self, cls: Any, actor_id: str) -> ActorRef[Any]: ...

    def in_doubt(self, actor_id: str) -> dict[int, tuple[str, str]]: ...


class Operations:
    """``error``, ``last_recovery``, ``restart``, ``in_doubt``, ``wait_in_doubt``,
    ``resolve`` of ``ActorSystem``."""

    def error(self: _Parts, actor_id: str) -> BaseException | None:
        """Why an actor is quarantined or stopped (None if it is not)."""
        _codec.validate_actor_id(actor_id)  # a typed error for a malformed id
        cell = self._cells.get(actor_id)
        if cell is not None:
            return cell.error
        return self._quarantined.get(actor_id)

    def last_recovery(self: _Parts, actor_id: str) -> RecoveryReport | None:
        """What the last recovery of this actor did (a ``RecoveryReport``), or None if it
        is not loaded."""
        _codec.validate_actor_id(actor_id)
        cell = self._cells.get(actor_id)
        return None if cell is None else cell.last_recovery

    async def restart(
        self: _Parts, actor_id: str, *, by: str | None = None, reason: str = ""
    ) -> ActorRef[Any]:
        """Start a quarantined actor again, its cause fixed (docs/upgrading.md): recorded (a
        ``restarted`` event), it recovers with the current code (``ActorQuarantinedError`` if
        it still fails). ``ActorNotFoundError`` if it is not quarantined here;
        ``ConfigurationError`` (nothing recorded) if it was quarantined for a damaged log."""
        _codec.validate_optional_text(by, "by")
        _codec.validate_text(reason, "reason")
        q = (self.store, self.registry, self._cells, self._quarantined, actor_id, by, reason)
        return await self.spawn(await _restart.quarantined_class(*q), actor_id)

    def in_doubt(self: _Parts, actor_id: str) -> dict[int, tuple[str, str]]:
        """The actor's intents waiting for an operator: ``{intent_seq: (tool, key)}``."""
        _codec.validate_actor_id(actor_id)  # a typed error for a malformed id
        cell = self._cells.get(actor_id)
        if cell is None:
            return {}
        return {seq: (w.tool, w.key) for seq, w in cell.in_doubt.items()}

    async def wait_in_doubt(
        self: _Parts, actor_id: str, *, poll: float = 0.01
    ) -> dict[int, tuple[str, str]]:
        """Wait until the actor has at least one in-doubt intent; return them (``poll``:
        seconds between looks, > 0)."""
        _codec.validate_seconds(poll, "poll", positive=True)
        while True:
            found = self.in_doubt(actor_id)
            if found:
                return found
            cell = self._cells.get(actor_id)
            if cell is not None and cell.error is not None:
                raise ActorQuarantinedError(actor_id, cell.error) from cell.error
            await anyio.sleep(poll)

    async def resolve(
        self: _Parts,
        actor_id: str,
        intent_seq: int,
        *,
        result: Any = _decisions.MISSING,
        retry: bool = False,
        fail: str | None = None,
        by: str | None = None,
        reason: str = "",
    ) -> None:
        """Settle an in-doubt tool call; the decision is recorded in the log.

        Exactly one of ``result=`` (the call happened and returned this), ``retry=True``
        (run it again, once) or ``fail="why"`` (the call did not happen; ``ctx.call`` raises
        ``ToolCallError`` in the handler). A cancelled write waiting for a ruling takes one
        as in ``ops.resolve``, through its owner's inbox if need be (docs/operators.md).
        """
        _codec.validate_actor_id(actor_id)
        _codec.validate_int(intent_seq, "intent_seq")
        rec = _decisions.operator_record(
            result=result, retry=retry, fail=fail, by=by, reason=reason
        )
        here = actor_id in self._cells or self._ownership is None  # else: its owner's
        if await rule_live(self.store, actor_id, intent_seq, rec, here):
            return  # a ruling on a cancelled write in doubt (_rulings.py)
        if (cell := self._cells.get(actor_id)) is None:
            raise ActorNotFoundError(f"actor {actor_id!r} is not running in this system")
        await cell.resolve(intent_seq, rec)
