"""Which task of a step made an effect ([F18]): the identity that does not depend on timing.

A step's handler runs in the root task of the step (path ``()``, written ``""``). Every task
a step task spawns while handler code runs (a task group, a nursery, ``asyncio.gather``,
``asyncio.TaskGroup``, ``asyncio.wait``, ``asyncio.wait_for`` on 3.11) gets the path of its
parent plus the number of tasks that parent spawned before it: ``(1,)``, ``(1, 0)`` ...
Deterministic code spawns in the same order on every run, so an effect's identity, the pair
(task path, number of the effect within its task), is the same live and on replay whichever
task ran first.

The current task's :class:`Node` lives in a ``ContextVar``. Spawns are seen without any
special combinator: on asyncio a task factory installed on the running loop (chaining any
factory already there) gives a child task a context whose node is the child's; on trio an
instrument does the same in ``task_spawned``. A task spawned outside a step pays one
``ContextVar.get``. The runtime's own work inside an effect (commits, deliveries, the tool
itself) runs with the node cleared (:class:`outside`), so the tasks it (or a tool's HTTP
pool) spawns are not counted: they happen live but not on replay.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from .._tracing import telemetry as _telemetry

if TYPE_CHECKING:
    import asyncio

__all__ = ["NODE", "Node", "NodeOwner", "Running", "current", "install", "outside"]


class NodeOwner(Protocol):
    """The step a node belongs to (its ``Context``)."""

    #: the step's handler returned (or raised): no more effects from its tasks
    ended: bool
    #: task path -> node, of every task of the step seen so far
    nodes: dict[str, Node]

    def _task_exited(self, node: Node) -> None:
        """A task spawned in the step (``node``) ended."""


class Node:
    """One task of a step: its path, how many tasks it spawned, how many effects it made."""

    __slots__ = ("index", "owner", "path", "spawned", "task")

    def __init__(self, owner: NodeOwner, path: tuple[int, ...] = ()) -> None:
        self.owner = owner
        self.path = path
        #: [F18] the dot-joined path as logged: "" for the root task, "1.0" for a grandchild
        self.task = ".".join(map(str, path)) if path else ""
        self.spawned = 0
        #: the number of the task's next effect
        self.index = 0

    def child(self) -> Node:
        k = self.spawned
        self.spawned += 1
        node = Node(self.owner, (*self.path, k))
        self.owner.nodes[node.task] = node
        return node

    def __repr__(self) -> str:
        return f"<task {self.task or 'root'} of a step>"


_NODE: contextvars.ContextVar[Node | None] = contextvars.ContextVar("actorlog_task", default=None)
#: the same, for the runtime's hot paths (a step's start, each ``ctx.call``): ``token =
#: NODE.set(node)`` ... ``NODE.reset(token)``, as ``Running`` and ``calling_outside`` do
NODE = _NODE


def current() -> Node | None:
    """The step task running now, or None (outside a step, in a thread, in a tool, ...)."""
    return _NODE.get()


class _Set:
    """Sets the node for a ``with`` block (a class: it runs for every effect)."""

    __slots__ = ("_token", "_value")

    def __init__(self, value: Node | None) -> None:
        self._value = value
        self._token: contextvars.Token[Node | None] | None = None

    def __enter__(self) -> None:
        self._token = _NODE.set(self._value)

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None
        _NODE.reset(self._token)


class Running:
    """Around the handler's ``receive``: its task is ``root`` (the step's root task), the
    spawn hook is installed, and the step is over when the block ends."""

    __slots__ = ("_root", "_token")

    def __init__(self, root: Node) -> None:
        self._root = root
        self._token: contextvars.Token[Node | None] | None = None

    def __enter__(self) -> None:
        install()
        self._token = _NODE.set(self._root)

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None
        _NODE.reset(self._token)
        self._root.owner.ended = True


def outside() -> _Set:
    """Around the runtime's part of an effect and around a tool: spawns are not counted."""
    return _Set(None)


class calling_outside:  # used like a function: ``with calling_outside(task):``
    """``outside()`` and ``telemetry.calling(task)`` in one block: around each
    ``ctx.call`` (spawns are not the step's; its spans name the task that made it)."""

    __slots__ = ("_node", "_task", "_value")

    def __init__(self, task: str) -> None:
        self._value = task

    def __enter__(self) -> None:
        self._node = _NODE.set(None)
        self._task = _telemetry.CALL_TASK.set(self._value)

    def __exit__(self, *exc: object) -> None:
        _telemetry.CALL_TASK.reset(self._task)
        _NODE.reset(self._node)


# -- the hooks -------------------------------------------------------------------------------


def install() -> None:
    """Install the spawn hook on the running event loop (asyncio) or run (trio), once: at
    the start of every step; a no-op when it is there."""
    aio = sys.modules.get("asyncio")  # imported by whatever runs an asyncio loop
    loop = aio._get_running_loop() if aio is not None else None
    if loop is None:  # not asyncio: trio (imported, since it runs), or no loop
        trio = sys.modules.get("trio")
        if trio is not None:
            with contextlib.suppress(RuntimeError):
                trio.lowlevel.add_instrument(_trio_instrument())  # a no-op if it is there
        return
    if not isinstance(loop.get_task_factory(), _Factory):
        # (typeshed's factory type misses the keyword arguments asyncio passes)
        loop.set_task_factory(_Factory(loop.get_task_factory(), aio.Task))  # type: ignore[union-attr]


class _Factory:
    """The asyncio task factory: a task spawned by a step task gets the next child node."""

    __slots__ = ("_prev", "_task")

    def __init__(self, prev: Any, task: type[asyncio.Task[Any]]) -> None:
        self._prev = prev
        self._task = task  # asyncio.Task (asyncio is not imported at import: trio runs too)

    def __call__(
        self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Future[Any]:
        parent = _NODE.get()
        if parent is None:
            if self._prev is not None:
                return self._prev(loop, coro, **kwargs)  # type: ignore[no-any-return]  # a user factory
            return self._task(coro, loop=loop, **kwargs)
        given = kwargs.get("context")
        context = contextvars.copy_context() if given is None else given.copy()
        child = parent.child()
        context.run(_NODE.set, child)
        kwargs["context"] = context
        if self._prev is not None:
            task = self._prev(loop, coro, **kwargs)
        else:
            task = self._task(coro, loop=loop, **kwargs)
        task.add_done_callback(lambda _: child.owner._task_exited(child))
        return task  # type: ignore[no-any-return]  # a user factory's task


_TRIO: list[Any] = []  # the trio instrument, built on first use (trio imported only then)


def _trio_instrument() -> Any:
    if _TRIO:
        return _TRIO[0]
    import trio

    class _Spawns(trio.abc.Instrument):
        """The trio instrument: a task spawned by a step task gets the next child node."""

        def task_spawned(self, task: trio.lowlevel.Task) -> None:
            parent = task.context.run(_NODE.get)
            if parent is not None:
                task.context.run(_NODE.set, parent.child())

        def task_exited(self, task: trio.lowlevel.Task) -> None:
            node = task.context.run(_NODE.get)
            if node is not None and node.path:
                node.owner._task_exited(node)

    _TRIO.append(_Spawns())
    return _TRIO[0]
