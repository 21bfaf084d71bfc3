"""A page of an actor's timeline: the newest ``timeline_entries`` log entries' steps, or the
ones before ``before`` (older on request), read from the log in one bounded pass.

The actor page and its live stream hold one window each, never the whole history: the page
reads only entries after ``since`` (plus the steps in progress at it, from their message),
so its size and the time to draw it do not grow with the log.
"""

from __future__ import annotations

import contextlib
import html

import attrs

from .. import ops
from ..ops.models import HistoryItem
from ..ops.reads import _actor_row
from ..ops.rulings import rulings_if_any
from ..store import Store

#: what a timeline shows besides the actor's status
Item = ops.Step | ops.SnapshotView | ops.Event | ops.Finding


@attrs.define
class Window:
    """Part of an actor's timeline.

    Attributes:
        actor: the actor's status.
        items: steps, snapshots, events and damage, in timeline order.
        since: the steps whose message was logged after this seq are shown (and those in
            progress at it).
        upto: the last seq shown (on the newest page: the log's end when the window was read;
            news appended meanwhile is the next window's).
        older: ``before`` for the page of older steps, or None (none are older).
        newer: ``before`` for the page of newer steps; None: the newest page follows (or
            this is it, when ``newest``).
        newest: this window ends at the log's end (the live stream continues it).
    """

    actor: ops.ActorStatus
    items: list[Item]
    since: int
    upto: int
    older: int | None
    newer: int | None
    newest: bool
    #: the actor's calls waiting for an operator's ruling (cancelled writes in doubt), from
    #: anywhere in its log, oldest first
    rulings: list[ops.Call] = attrs.Factory(list)

    @property
    def steps(self) -> list[ops.Step]:
        return [i for i in self.items if isinstance(i, ops.Step)]

    @property
    def damage(self) -> list[ops.Finding]:
        return [i for i in self.items if isinstance(i, ops.Finding)]


async def window(
    store: Store, actor_id: str, *, size: int, before: int | None = None, since: int | None = None
) -> Window:
    """The steps of the ``size`` entries up to ``before`` (default: the log's end), or of
    the entries after ``since`` (the live stream's news; at most ``size`` of them: older
    news is left for the page's "older" link).

    Raises:
        ActorNotFoundError: no such actor.
    """
    row = await _actor_row(store, actor_id)  # the operator API's lookup (and message)
    last = row.last_seq
    newest = before is None or before >= last
    top = last if newest or before is None else max(0, before)
    floor = max(0, row.first_seq - 1)  # compacted entries are gone: nothing older to show
    lo = max(floor, top - size)
    if since is not None and newest:
        lo = max(lo, min(since, last))
    status: ops.ActorStatus | None = None
    items: list[Item] = []
    gen = ops.iter_history(store, actor_id, since=lo)
    async with contextlib.aclosing(gen):
        async for item in gen:
            if isinstance(item, ops.ActorStatus):
                status = item
            elif not _after(item, top):  # news appended while this is read: the next window's
                items.append(item)
            elif isinstance(item, ops.Step) and item.step_seq is not None:
                break  # steps finish in message order: the rest are newer
    assert status is not None
    newer = None if newest or top + size >= status.last_seq else top + size
    return Window(
        actor=status,
        items=items,
        since=lo,
        upto=top,
        older=lo if lo > floor else None,
        newer=newer,
        newest=newest,
        rulings=await _rulings(store, actor_id, items),
    )


async def _rulings(store: Store, actor_id: str, items: list[Item]) -> list[ops.Call]:
    """The calls needing a ruling: those of the steps shown (read already) and, from the
    cheap reads of ``rulings_if_any``, those of older steps."""
    found = {c.intent_seq: c for s in items if isinstance(s, ops.Step) for c in s.calls}
    shown = {seq: c for seq, c in found.items() if c.needs_ruling}
    for c in await rulings_if_any(store, actor_id):
        if c.intent_seq not in found:
            shown[c.intent_seq] = c
    return [shown[k] for k in sorted(shown)]


def _after(item: HistoryItem, top: int) -> bool:
    """Whether ``item`` is newer than seq ``top`` (an event has no seq: never)."""
    if isinstance(item, ops.Step):
        return item.message_seq > top
    if isinstance(item, ops.SnapshotView | ops.Finding):
        return item.seq > top
    return False


def item_key(item: Item) -> str:
    """What identifies a timeline item across live updates (a step is sent again while it
    is in progress, and replaces the one shown)."""
    if isinstance(item, ops.Step):
        return f"step-{item.message_seq}"
    if isinstance(item, ops.SnapshotView):
        return f"snapshot-{item.seq}"
    if isinstance(item, ops.Event):
        return f"event-{item.kind}-{item.at!r}"
    return f"damage-{item.where}-{item.seq}-{item.check}"


def keyed(fragment: str, key: str) -> str:
    """An item's HTML with its key (``data-key``) on its outer element."""
    head, sep, rest = fragment.partition(' class="item')
    if not sep:
        return fragment
    return f'{head} data-key="{html.escape(key, quote=True)}"{sep}{rest}'
