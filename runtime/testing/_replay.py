"""The replay tester: recorded histories replayed against the current code, no tool running
(``actorlog.testing.replay``, ``actorlog replay-check``; docs/upgrading.md).

Like Temporal's ``Replayer``: every actor's log (from a store, read only, or from
``actorlog export`` JSON lines) is copied into a ``MemoryStore`` and read by the recovery
path itself (``_durability/plan.py``); each step is re-run through the replaying ``Context``,
which serves every effect from the log and raises ``NonDeterminismError`` where the code
asks for another one. Nothing is ever written to the source; no tool, send or spawn runs:
an interrupted step is replayed as far as its log goes and stopped where it would go live.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import attrs

from .._core.readonly import ReachedLive, ReadOnlyHost
from .._core.replay import handler_never_ran, run_recorded
from .._durability.plan import plan as read_plan
from .._effects.actor import Actor
from .._effects.context import Context
from .._effects.registry import Registry
from .._journal import codec as _codec
from .._journal.errors import ActorlogError, ConfigurationError, NonDeterminismError
from ..store import ActorRow, EntryRow, Store

if TYPE_CHECKING:
    pass

__all__ = ["Divergence", "ReplayReport", "replay"]


@attrs.frozen
class Divergence:
    """One actor whose recorded history the current code does not replay."""

    actor_id: str
    actor_type: str
    #: seq of the message whose step diverged
    step_seq: int
    #: the effect's position in the step (None: not an effect, e.g. an undecodable message)
    index: int | None
    #: what the log recorded there, and what the code asked for
    expected: str
    got: str
    #: the error the runtime would quarantine the actor with
    error: str
    #: [F18] the task of the step whose effect diverged ("" for the handler's own)
    task: str = ""

    def __str__(self) -> str:
        where = f"step seq {self.step_seq}"
        if self.index is not None:
            where += f", effect #{self.index}"
            if self.task:
                where += f" of task {self.task}"
        return (
            f"{self.actor_id} ({self.actor_type}) {where}: expected {self.expected}, got {self.got}"
        )


@attrs.frozen
class ReplayReport:
    """What :func:`replay` found. ``ok`` unless some actor diverged."""

    #: actors replayed (each up to its first divergence)
    actors: int
    #: steps replayed without divergence
    steps: int
    divergences: list[Divergence]
    #: actors not replayed, with why (class not given, damaged, compacted log)
    skipped: list[tuple[str, str]]

    @property
    def ok(self) -> bool:
        return not self.divergences

    def lines(self) -> list[str]:
        """The report as text lines (what ``actorlog replay-check`` prints)."""
        out = [f"DIVERGED {d}" for d in self.divergences]
        out += [f"skipped {a}: {why}" for a, why in self.skipped]
        verdict = "ok" if self.ok else f"{len(self.divergences)} actor(s) diverged"
        out.append(f"replayed {self.actors} actor(s), {self.steps} step(s): {verdict}")
        return out

    def check(self) -> None:
        """Raise ``AssertionError`` listing every divergence, unless ``ok`` (for tests)."""
        if not self.ok:
            raise AssertionError("replay diverged:\n" + "\n".join(self.lines()))


@attrs.define
class _Source:
    row: ActorRow
    entries: list[EntryRow]
    problem: str | None = None


async def replay(
    source: Store | str | os.PathLike[str],
    *,
    actors: Iterable[type[Actor[Any]]],
    messages: Iterable[type] = (),
    actor_ids: Iterable[str] | None = None,
) -> ReplayReport:
    """Replay recorded histories against the current code, with no tool running.

    Args:
        source: an open ``Store`` (only read), a store URL or SQLite file path (opened
            read-only here), or an ``actorlog export`` file (JSON lines; several exports
            may be concatenated).
        actors: the actor classes to check; actors of other classes are skipped.
        messages: extra message classes (as for ``ActorSystem``).
        actor_ids: only these actors (default: every actor in the source).

    Returns a :class:`ReplayReport`: every actor that diverges (its first divergence: the
    state after it is not the recorded one), the steps replayed, the actors skipped. Each
    actor is replayed from its first entry (snapshots are not used, so every recorded step
    is checked); a log compacted away is skipped.
    """
    registry = Registry()
    for cls in actors:
        registry.register(cls)
    for m in messages:
        registry.learn(m)
    wanted = None if actor_ids is None else set(actor_ids)
    sources = [s async for s in _sources(source, wanted)]
    divergences: list[Divergence] = []
    skipped: list[tuple[str, str]] = []
    replayed = steps = 0
    from actorlog.stores import MemoryStore

    for src in sources:
        aid, tag = src.row.actor_id, src.row.actor_type
        found = registry.actor_class(tag)
        if found is None:
            skipped.append((aid, f"class {tag} not given in actors=[...]"))
            continue
        if src.problem is not None:
            skipped.append((aid, src.problem))
            continue
        if src.row.first_seq > 1:
            skipped.append((aid, f"log compacted: it starts at seq {src.row.first_seq}"))
            continue
        mem = MemoryStore()
        await mem.open()
        try:
            await mem.register_actor(aid, tag)
            if src.entries:
                await mem.append(aid, 0, src.entries)
            n, div = await _replay_actor(mem, registry, found, aid)
        except ActorlogError as exc:
            skipped.append((aid, f"unreadable: {exc}"))
            continue
        finally:
            await mem.close()
        replayed += 1
        steps += n
        if div is not None:
            divergences.append(div)
    return ReplayReport(replayed, steps, divergences, skipped)


async def _replay_actor(
    store: Store, registry: Registry, cls: type[Actor[Any]], actor_id: str
) -> tuple[int, Divergence | None]:
    """Replay one actor's log (copied into ``store``): (steps replayed, first divergence)."""
    actor = cls()
    actor.actor_id = actor_id
    initial = actor.initial_state()
    state_type = type(initial)
    plan = await read_plan(
        store,
        actor_id,
        state_tag=_codec.type_tag(state_type),
        schema_version=cls.schema_version,
        on_reject=lambda _i, _r: None,
    )
    actor.state = initial
    host = ReadOnlyHost(store, actor_id, registry)
    where = f"{cls.__qualname__} (actor {actor_id!r}, replay-check)"
    tag = _codec.type_tag(cls)
    done = 0
    for m in plan.messages:
        if handler_never_ran(m):
            continue  # as recovery: its handler never ran live
        try:
            msg = registry.decode_message(m.type_tag, m.body)
        except ActorlogError as exc:
            return done, Divergence(actor_id, tag, m.seq, None, m.type_tag, str(exc), str(exc))
        complete = m.step is not None
        ctx = Context(host, m.seq, m.recorded, complete=complete, incarnation=m.incarnation)
        raised: BaseException | None = None
        try:
            raised = await run_recorded(actor, ctx, msg, m, where)
        except ReachedLive:
            pass
        if ctx.fatal is None and complete:
            try:
                ctx.check_consumed(raised)
            except ActorlogError:
                pass
        fatal = ctx.fatal
        if isinstance(fatal, NonDeterminismError):
            return done, Divergence(
                actor_id,
                tag,
                m.seq,
                fatal.index,
                fatal.expected,
                fatal.got,
                str(fatal),
                fatal.task,
            )
        if fatal is not None:
            what = f"{type(fatal).__name__}: {fatal}"
            return done, Divergence(actor_id, tag, m.seq, None, "the recorded step", what, what)
        done += 1
        if not complete:
            break
    return done, None


async def _sources(
    source: Store | str | os.PathLike[str], wanted: set[str] | None
) -> AsyncIterator[_Source]:
    if isinstance(source, str | os.PathLike) and _is_export(os.fspath(source)):
        for src in _read_export(os.fspath(source)):
            if wanted is None or src.row.actor_id in wanted:
                yield src
        return
    if isinstance(source, str | os.PathLike):
        from .. import ops

        url = os.fspath(source)
        if "://" not in url:  # a path: a SQLite file
            url = "sqlite:///" + os.path.abspath(url)
        async with ops.opened(url) as store:
            async for src in _read_store(store, wanted):
                yield src
        return
    async for src in _read_store(source, wanted):
        yield src


async def _read_store(store: Store, wanted: set[str] | None) -> AsyncIterator[_Source]:
    for row in await store.list_actors():
        if wanted is not None and row.actor_id not in wanted:
            continue
        if row.damage is not None:
            yield _Source(row, [], f"damaged summary row: {row.damage}")
            continue
        rows = list(await store.read(row.actor_id, after_seq=0))
        yield _Source(row, rows)


def _is_export(path: str) -> bool:
    """An ``actorlog export`` file: JSON lines whose first is an ``actor`` header."""
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        head = f.read(1)
    return head == b"{"


def _read_export(path: str) -> Iterator[_Source]:
    """Actors (and their entries) from ``actorlog export`` output, possibly concatenated.
    Entries are rebuilt as exported (``payload_b64`` when present, else the JSON payload)
    and checksummed again: the export is the fixture's source of truth."""
    current: _Source | None = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                kind = item["type"]
            except RecursionError:  # nested deeper than the JSON parser's stack
                raise ConfigurationError(
                    f"{path}:{n}: not an 'actorlog export' line (nested too deeply)"
                ) from None
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigurationError(
                    f"{path}:{n}: not an 'actorlog export' line ({exc})"
                ) from None
            if kind == "actor":
                if current is not None:
                    yield current
                current = _Source(
                    ActorRow(
                        actor_id=item["actor_id"],
                        actor_type=item["actor_type"],
                        last_seq=item["last_seq"],
                        first_seq=item.get("first_seq", 1),
                        last_message_seq=item.get("last_message_seq", 0),
                        handled_seq=item.get("handled_seq", 0),
                        created_at=item.get("created_at", 0.0),
                    ),
                    [],
                )
            elif kind == "entry":
                if current is None:
                    raise ConfigurationError(f"{path}:{n}: an entry before any actor header")
                if current.problem is not None:
                    continue
                if not item.get("valid", True):
                    current.problem = f"damaged at seq {item['seq']}: {item.get('problem')}"
                    continue
                if "payload_b64" in item:
                    data = base64.b64decode(item["payload_b64"])
                else:
                    data = _codec.encode_json(item["payload"], "exported payload")
                current.entries.append(
                    _codec.make_row(
                        current.row.actor_id,
                        item["seq"],
                        item["kind"],
                        item["type_tag"],
                        item["ref"],
                        item.get("message_id"),
                        data,
                    )
                )
    if current is not None:
        yield current
