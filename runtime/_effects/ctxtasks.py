"""The tasks of a step's ``Context`` ([F18]): which task asks for an effect (and a typed
error where that cannot be known), replay in log order across tasks (``_sequencer``), and
the end of a task or of the step. Mixed into ``Context`` as :class:`StepTasks`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, NoReturn

from .._journal.errors import ConfigurationError
from .._journal.records import Recorded, ResultRecord, SettledBy
from .tasks import NODE, Node, Running

if TYPE_CHECKING:
    from .sequencer import Sequencer

__all__ = ["StepTasks", "by_task", "path_of"]


class StepTasks:
    """Task bookkeeping of :class:`~actorlog.Context` (a mixin: ``Context`` provides the
    attributes declared here)."""

    if TYPE_CHECKING:
        root: Node
        nodes: dict[str, Node]
        ended: bool
        fatal: BaseException | None
        _thread: int
        _tasks: dict[str, list[Recorded]]
        _seq: Sequencer | None
        #: a step recorded before [F18] with effects of spawned tasks (see ``_legacy``)
        _compat: bool | None

        def _nondeterminism(self, node: Node, index: int, expected: str, got: str) -> None: ...
        @staticmethod
        def _describe_rec(rec: Recorded) -> str: ...

    def _handler_task(self) -> Running:
        """Around the handler's ``receive``: it runs as the step's root task, the tasks it
        spawns are counted, and the step ends (its effects are refused) when it returns."""
        return Running(self.root)

    def _legacy(self, node: Node) -> Node:
        """A step recorded before [F18] whose handler ran effects in tasks it spawned: its
        log numbers every effect in one sequence, as the handler's own. The first effect a
        spawned task asks for, while such a log still has effects to serve, switches the
        step to that: every task's effects are served (and written) as the root's, in
        the order they are asked for, as before [F18]."""
        if self._compat is None:
            self._compat = len(self._tasks) == 1 and self.root.index < len(self._tasks[""])
        return self.root if self._compat else node

    def _task(self, what: str) -> Node:
        """The task of this step asking for effect ``what`` (``ctx.call`` ...), or a
        ``ConfigurationError`` saying why it cannot be durable (fail fast, at the call)."""
        node = NODE.get()  # ``current()``
        if (
            node is not None
            and node.owner is self
            and not self.ended
            and threading.get_ident() == self._thread
        ):
            if node.path and self._compat is not False:
                node = self._legacy(node)
            if self._seq is not None:
                self._seq.blocked(node)
            return node
        if threading.get_ident() != self._thread:
            where = "from another thread"
        elif self.ended:
            where = "after the step's handler returned (from a task that outlived it)"
        elif node is not None:
            where = "with the Context of another step"
        else:
            where = (
                "from a task actorlog did not see start, or from inside a running tool (a "
                "task spawned by the runtime or by a tool is not part of the step)"
            )
        raise ConfigurationError(
            f"{what} was called {where}: it cannot be made durable, because a replay could "
            "not tell which task of the step made it. Call ctx only from the handler and "
            "from tasks it starts while it runs (task groups, nurseries, asyncio.gather, "
            "asyncio.TaskGroup, asyncio.wait), in the event loop's thread, before receive "
            "returns; pass results back to the handler instead"
        )

    async def _ordered(self, node: Node, rec: Recorded | None) -> None:
        """Replaying several tasks: wait for this call's turn (its outcome's place in the
        log order), or until the log is drained before an effect that is not served from
        it (``_sequencer``)."""
        seq = self._seq
        assert seq is not None
        if rec is None or not seq.ordered(rec.seq):
            await seq.drained(node)
            return
        settled = next((o for o in rec.outcomes if o.settles), None)
        record = None if settled is None else settled.record
        if (
            isinstance(record, ResultRecord)
            and record.settled_by == SettledBy.CANCELLED
            and (record.error is None or record.error.type != "StepCancelledError")
        ):
            await seq.lost(rec.seq, node)  # cancelled live by the handler's own scope
        await seq.turn(rec.seq, node)

    def _stuck(self, seq: int) -> NoReturn:
        """The recorded effect ``seq`` can no longer be asked for: its task ended (or was
        never started) without asking for it."""
        for task, recorded in self._tasks.items():
            for index, rec in enumerate(recorded):
                if rec.seq == seq:
                    node = Node(self, path_of(task))
                    what = "the end of its task" if task in self.nodes else "no such task started"
                    self._nondeterminism(node, index, self._describe_rec(rec), what)
        raise AssertionError(seq)

    def _task_exited(self, node: Node) -> None:
        """A task of this step ended (spawn hooks): if it left recorded effects unasked (or
        recorded tasks it never started), replay cannot go on: fail its waiters."""
        seq = self._seq
        if seq is None:
            return
        recorded = self._tasks.get(node.task)
        if recorded is not None and node.index < len(recorded):
            seq.task_ended(recorded[node.index].seq)
            return
        depth = len(node.path) + 1
        for task, recs in self._tasks.items():
            path = path_of(task)
            if len(path) == depth and path[:-1] == node.path and path[-1] >= node.spawned:
                seq.task_ended(recs[0].seq)
                return

    def check_consumed(self, raised: BaseException | None = None) -> None:
        """After a replayed handler returns (or ``raised`` this): every recorded effect must
        have been asked for. The error names the exception the handler raised instead."""
        if self.fatal is not None:
            return
        left: list[tuple[int, Node, Recorded]] = []
        for task, recorded in self._tasks.items():
            node = self.nodes.get(task) or Node(self, path_of(task))
            if node.index < len(recorded):
                left.append((recorded[node.index].seq, node, recorded[node.index]))
        if left:
            _, node, rec = min(left, key=lambda x: x[0])  # the first one the log holds
            got = "the end of the step" if not node.task else f"the end of task {node.task}"
            if raised is not None:
                got = f"the handler raising {type(raised).__name__}: {raised}"
            self._nondeterminism(node, node.index, self._describe_rec(rec), got)


def by_task(recorded: list[Recorded]) -> dict[str, list[Recorded]]:
    """[F18] The recorded effects of each task, each list in the task's own order."""
    if not recorded:
        return {"": recorded}  # a live step
    if all(not rec.record.task for rec in recorded):
        return {"": recorded}  # the handler's own task only (every step without concurrency)
    tasks: dict[str, list[Recorded]] = {"": []}
    for rec in recorded:
        task = rec.record.task
        if task:
            tasks.setdefault(task, []).append(rec)
        else:
            tasks[""].append(rec)
    return tasks


def path_of(task: str) -> tuple[int, ...]:
    return tuple(int(p) for p in task.split(".")) if task else ()
