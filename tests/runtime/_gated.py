"""A store wrapper that holds chosen calls at a gate, to force races deterministically.

``GatedStore(real_store)`` delegates every call to the real store. ``gate(method)`` makes the
next matching call (or the ``nth``) stop before it reaches the store until the test releases
it, and optionally fail (with ``StoreUnavailableError``, as a real store does for an I/O
error) instead of reaching the store. No timing: the test waits for ``reached`` and decides.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import attrs
from actorlog import StoreUnavailableError
from actorlog.store import SnapshotRow, Store

__all__ = ["Gate", "GatedStore"]


@attrs.define(eq=False)
class Gate:
    method: str
    nth: int = 1
    actor_id: str | None = None
    fail: bool = False
    #: only appends carrying one of these entry kinds match
    entry_kinds: tuple[str, ...] | None = None
    seen: int = 0
    reached: anyio.Event = attrs.field(factory=anyio.Event)
    release: anyio.Event = attrs.field(factory=anyio.Event)

    def open(self) -> None:
        self.release.set()


class GatedStore:
    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.gates: list[Gate] = []
        self.calls: Counter[str] = Counter()
        #: seconds every call of a method sleeps before it reaches the store
        self.delay: dict[str, float] = {}

    def gate(self, method: str, **kw: Any) -> Gate:
        g = Gate(method, **kw)
        self.gates.append(g)
        return g

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name in self.delay:
                await anyio.sleep(self.delay[name])
            first = args[0] if args else None
            actor_id = first.info.actor_id if isinstance(first, SnapshotRow) else first
            kinds: set[str] = set()
            if name == "append" and len(args) >= 3:
                kinds = {r.kind for r in args[2]}
            for g in list(self.gates):
                if g.method != name or (g.actor_id is not None and g.actor_id != actor_id):
                    continue
                if g.entry_kinds is not None and not kinds & set(g.entry_kinds):
                    continue
                g.seen += 1
                if g.seen != g.nth:
                    continue
                self.gates.remove(g)
                g.reached.set()
                await g.release.wait()
                if g.fail:
                    raise StoreUnavailableError(f"injected failure of {name}")
            return await attr(*args, **kwargs)

        return call
