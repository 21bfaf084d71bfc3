"""Which task of a step each journaled pydantic-ai effect is logged under (FORMAT.md [F18]):
see ``_Identities``."""

from __future__ import annotations

import asyncio

from .._effects import tasks as _tasks
from .._effects.context import Context

__all__ = ["_Identities"]


class _Identities:
    """The task each journaled model request and tool call of a run is logged under
    (FORMAT.md [F18]).

    pydantic-ai runs each node of its graph, and each tool call, in a task of its own, and
    spawns helper tasks as it waits for tool calls (one per wake-up: how many depends on
    timing, and differs on replay). So the tasks' spawn order is not a stable identity for
    its effects. Each effect gets instead a task node of its own, numbered in the order the
    run asks for them (``"0.0"``, ``"0.1"``, ...: children of one node the step's own task
    makes first), which is the same on every replay: the model requests come one after
    another, and the tool calls of one response start in the order the model gave them.
    The node ends with the pydantic-ai task that made the effect, as a spawned task would.

    A run recorded by a version before parallel tool calls has its effects in the step's
    own task (``legacy``): it is replayed, and continued, the same way, one call at a time.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        #: the step's log holds effects of the step's own task: recorded by an earlier version
        self.legacy = ctx._next_recorded_args() is not None
        self._parent = None if self.legacy else ctx.root.child()

    def outside(self) -> _tasks._Set:
        """Around the run: pydantic-ai's own tasks (its graph's nodes, its toolset
        gathers, one per tool call: about 20 a run) are not counted as tasks of the step.
        Every effect of the run is logged under the node ``node`` gives it, so the node, the
        context copy and the done callback the step's spawn hook made for each were never
        used. A ``legacy`` run keeps the step's own task, as it ran before."""
        return _tasks._Set(self.ctx.root if self.legacy else None)

    def node(self) -> _tasks.Node:
        if self._parent is None:
            return self.ctx.root
        node = self._parent.child()
        task = asyncio.current_task()
        if task is not None:
            task.add_done_callback(lambda _: self.ctx._task_exited(node))
        return node
