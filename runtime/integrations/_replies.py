"""A conversation's run replies with its new messages only (issue 25): the chain of replies.

A durable agent's conversation is its actor's state; each run's reply used to carry the
whole conversation, so the log grew with the square of its length. Now a run's reply holds
the run's **tail** (the conversation after the part it kept of the one before) and says
where the rest is (FORMAT.md [F23]):

``run``
    this run's message seq;
``base``
    the message seq of the earlier run whose conversation this run continued (None: an
    empty history, the conversation's first run or a ``new_conversation``);
``keep``
    how many leading messages of ``base``'s conversation this run's conversation starts
    with (all of them, unless the framework rewrote the history);
``tail``
    the rest of this run's conversation (its new messages, normally);
``origin``
    where the chain starts in the log (the message seq of its first run): a hint for
    reading it in one go.

A run whose state has a history but no ``run_seq`` (a state recovered from a snapshot
written before this form) replies in the old form, the whole conversation under the
framework's key (``messages`` / ``items``), and so ends the chain. The caller rebuilds the
whole conversation from the reply, the earlier replies of its chain in the log, and, when
compaction removed the start of the chain, the snapshot whose state is the conversation of
the run where the kept log starts (``whole``): in another process too, after any crash.

A caller that runs one conversation again and again (``DurableAgent.run``) keeps the
conversation it rebuilt last (``ChainCache``): the next run's reply continues it, so the
caller reads only that run's base reply and message, to check they are the reply the kept
conversation ends with and a message of the same log (its incarnation id, [F13]), instead of
every reply of the chain.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from .._journal import compact as _compact, frames as _frames
from .._journal.checks import shown, validate_text
from .._journal.errors import ActorlogError, ConfigurationError, CorruptEntryError
from .._journal.records import EntryKind, MessageRecord, StepRecord, decode_entry
from .._runtime.system import ActorSystem
from ..store import CompactingStore, SnapshotInfo, Store
from ._effects import check_timeout

__all__ = [
    "ChainCache",
    "answers",
    "check_call",
    "check_run",
    "parse",
    "reply_fields",
    "result_of",
    "shared_prefix",
    "whole",
]

R = TypeVar("R")


def shared_prefix(before: Sequence[Any], after: Sequence[Any]) -> int:
    """How many leading items (JSON values) ``after`` shares with ``before``."""
    n = min(len(before), len(after))
    i = 0
    while i < n and before[i] == after[i]:
        i += 1
    return i


def reply_fields(
    key: str,
    history: list[Any],
    everything: list[Any],
    *,
    base: int,
    origin: int,
    run_seq: int,
    whole: bool = False,
) -> tuple[dict[str, Any], int]:
    """The conversation's part of a run's reply, and the chain's origin after the run.

    ``history`` is the conversation the run started from (the state's, plain JSON),
    ``everything`` the conversation after it; ``base`` the message seq of the run whose
    conversation ``history`` is (0: not known, a state written before the chain);
    ``origin`` the chain's start so far; ``run_seq`` this run's message seq; ``whole``:
    reply in the old form anyway (a run the log shows was recorded by an earlier version,
    replayed: its logged reply is whole, so the chains after it start there)."""
    if whole or (history and not base):  # the old form: the whole conversation ends the chain
        return {key: everything}, run_seq
    prev: int | None = base
    if not history:  # the chain starts here
        prev, origin = None, run_seq
    keep = shared_prefix(history, everything)
    fields = {"run": run_seq, "base": prev, "keep": keep, "tail": everything[keep:]}
    return {**fields, "origin": origin}, origin


def parse(reply: Any, key: str) -> tuple[int, int | None, int, list[Any], int] | list[Any]:
    """A run's reply's conversation: the whole conversation (the old form), or its
    ``(run, base, keep, tail, origin)``. Raises ``ValueError`` for anything else."""
    if not isinstance(reply, dict):
        raise ValueError(f"a run's reply is a dict, not {type(reply).__qualname__}")
    if key in reply:
        if not isinstance(reply[key], list):
            raise ValueError(f"{key!r} is not a list")
        return list(reply[key])
    run: Any = reply.get("run")
    base: Any = reply.get("base")
    keep: Any = reply.get("keep")
    tail: Any = reply.get("tail")
    origin: Any = reply.get("origin", 0)
    if not (_seq(run) and (base is None or _seq(base)) and _count(keep) and _count(origin)):
        raise ValueError("its run, base, keep or origin is not a seq or a count")
    if base is not None and base >= run:
        raise ValueError(f"it continues run {base}, not an earlier one than its own ({run})")
    if not isinstance(tail, list):
        raise ValueError("its tail is not a list")
    return run, base, keep, list(tail), origin


def _seq(value: object) -> bool:
    return type(value) is int and value > 0


def _count(value: object) -> bool:
    return type(value) is int and value >= 0


class _Kept:
    __slots__ = ("incarnation", "link", "store", "texts")

    def __init__(
        self, store: Store, incarnation: str, link: tuple[Any, ...], texts: list[str]
    ) -> None:
        self.store = store
        #: the incarnation id of the log the kept run's message is in ([F13]): a conversation
        #: deleted and started again may reply the same at the same seq (a stopped clock,
        #: the same prompt), never in the same incarnation
        self.incarnation = incarnation
        #: the reply of the run whose conversation this is: its (run, base, keep, origin,
        #: how many messages its tail holds); the tail is the end of ``texts``
        self.link = link
        #: each message of that conversation as JSON text
        self.texts = texts

    def is_reply(self, parsed: tuple[int, int | None, int, list[Any], int]) -> bool:
        """Is ``parsed`` (a reply read from the log) the reply kept?"""
        run, base, keep, tail, origin = parsed
        if (run, base, keep, origin, len(tail)) != self.link:
            return False
        texts = self.texts[len(self.texts) - len(tail) :]
        return bool(json.loads("[" + ",".join(texts) + "]") == tail)


class ChainCache:
    """Per conversation (store, actor id), the whole conversation its caller rebuilt last,
    and the reply of that run (at most ``limit`` conversations, the least recently used
    dropped first). ``whole`` rebuilds a reply that continues the kept run from it: it reads
    that run's reply and message from the log (two entries, their checksums verified) and
    uses the kept conversation only if the log's reply is the kept one and its message has
    the kept incarnation id (an actor deleted and registered again has another log, whose
    replies at the same seqs may be the same: a stopped clock, the same prompts), else it
    reads the chain.

    The conversation is kept as JSON text and loaded again for each result, so results
    share no object with it or with each other. A conversation's first run (no base) is not
    kept: its caller reads nothing, and a fresh run pays for no copy."""

    def __init__(self, key: str, limit: int = 128) -> None:
        self.key = key
        self._limit = limit
        self._kept: OrderedDict[tuple[int, str], _Kept] = OrderedDict()

    async def continued(
        self, store: Store, actor_id: str, parsed: tuple[int, int | None, int, list[Any], int]
    ) -> list[Any] | None:
        """The whole conversation of ``parsed`` (a reply whose base is the kept run), or
        None: nothing kept for it, or the log's reply of the kept run is not the kept one.
        Raises ``CorruptEntryError`` when that reply is damaged."""
        kept = self._kept.get((id(store), actor_id))
        _, base, keep, tail, _ = parsed
        if kept is None or kept.store is not store or kept.link[0] != base:
            return None
        if base is None or keep > len(kept.texts):
            return None
        found = await _step(store, actor_id, base)
        if found is None:
            return None
        try:
            logged = parse(found[1], self.key)
        except ValueError:
            return None  # the chain's read says what is wrong with it
        if isinstance(logged, list) or not kept.is_reply(logged):
            return None
        # the same log: a later run of it (the reply continues ``base``) is in it too
        if await _incarnation(store, actor_id, base) != kept.incarnation:
            return None
        texts = kept.texts[:keep]
        history: list[Any] = json.loads("[" + ",".join(texts) + "]")
        self._put(store, actor_id, kept.incarnation, parsed, texts, tail)
        return history + tail

    async def keep(
        self,
        store: Store,
        actor_id: str,
        parsed: tuple[int, int | None, int, list[Any], int],
        history: list[Any],
    ) -> None:
        """Keep ``history``, the whole conversation of the reply ``parsed`` (not kept when
        its run's message records no incarnation id)."""
        if parsed[1] is not None:
            incarnation = await _incarnation(store, actor_id, parsed[0])
            if incarnation is None:
                self._kept.pop((id(store), actor_id), None)
                return
            tail = parsed[3]
            at = len(history) - len(tail)
            self._put(store, actor_id, incarnation, parsed, [], history[:at] + tail)

    def _put(
        self,
        store: Store,
        actor_id: str,
        incarnation: str,
        parsed: tuple[int, int | None, int, list[Any], int],
        texts: list[str],
        more: list[Any],
    ) -> None:
        """Keep ``texts`` and the messages ``more`` (ending with ``parsed``'s tail) as the
        conversation of the run ``parsed`` is the reply of, in the log ``incarnation``."""
        at = (id(store), actor_id)
        self._kept.pop(at, None)
        run, base, keep, tail, origin = parsed
        try:
            texts = texts + [json.dumps(m) for m in more]
        except (TypeError, ValueError):  # not JSON: not kept (the chain is read next time)
            return
        self._kept[at] = _Kept(store, incarnation, (run, base, keep, origin, len(tail)), texts)
        while len(self._kept) > self._limit:
            self._kept.popitem(last=False)


async def whole(
    store: Store,
    actor_id: str,
    reply: dict[str, Any],
    key: str,
    *,
    check: bool = True,
    cache: ChainCache | None = None,
) -> list[Any]:
    """The whole conversation a run's ``reply`` stands for (plain JSON): the reply's own in
    the old form, else its chain's, read from ``store``. Raises ``ValueError`` if ``reply``
    is not a run's reply, ``CorruptEntryError`` when a reply of the chain is damaged, or
    neither the log nor a snapshot holds the chain's start (compaction keeps one of them,
    [F23]). With ``check`` (a reply a caller hands in), ``ConfigurationError`` unless the
    log of ``actor_id`` holds the reply's run with this reply; ``run``/``answer`` pass
    False for the reply their own ``ask`` just got from that actor, and their
    conversation's ``cache``: a reply continuing the conversation kept there is rebuilt
    from it (``ChainCache``), and the conversation rebuilt is kept there."""
    parsed = parse(reply, key)
    if isinstance(parsed, list):
        return parsed
    if cache is not None:
        continued = await cache.continued(store, actor_id, parsed)
        if continued is not None:
            return continued
    top = parsed
    #: the runs of the chain, newest first, and the (keep, tail) of each run's reply
    seqs: list[int] = [parsed[0]]
    links: list[tuple[int, list[Any]]] = []
    steps: dict[int, tuple[int, Any]] | None = None
    history: list[Any] = []
    while True:
        _, base, keep, tail, origin = parsed
        links.append((keep, tail))
        if base is None:
            break
        seqs.append(base)
        if steps is None:  # the chain's replies in one read, from its origin on
            steps = await _steps(store, actor_id, origin or base)
            if check:  # a reply handed in: it must be this conversation's
                await _check_own(store, actor_id, steps, parsed, key)
        found = steps.get(base)
        if found is None:
            found = await _step(store, actor_id, base)
        if found is None:  # compacted away: a snapshot holds the chain's start
            at, history = await _from_snapshot(store, actor_id, seqs, key)
            del links[at:]  # the snapshot is run seqs[at]'s conversation: newer tails only
            break
        row_seq, found_reply = found
        try:
            parsed = parse(found_reply, key)
        except ValueError as exc:
            raise CorruptEntryError(actor_id, row_seq, "decode", f"a run's reply: {exc}") from None
        if isinstance(parsed, list):  # the old form: the whole conversation
            history = parsed
            break
        if parsed[0] != base:
            raise CorruptEntryError(
                actor_id, row_seq, "reference", f"the reply of run {base} names run {parsed[0]}"
            )
    for keep, tail in reversed(links):
        history = history[:keep] + tail
    if cache is not None:
        await cache.keep(store, actor_id, top, history)
    return history


async def _check_own(
    store: Store,
    actor_id: str,
    steps: dict[int, tuple[int, Any]],
    parsed: tuple[int, int | None, int, list[Any], int],
    key: str,
) -> None:
    """Raise ``ConfigurationError`` unless ``actor_id``'s log holds the reply ``parsed``
    stands for as its run's reply (a reply of another conversation would otherwise be read
    against this one's chain), or compaction removed that run's step."""
    run = parsed[0]
    found = steps.get(run)
    if found is None:
        found = await _step(store, actor_id, run)
    if found is None:
        start = await store.log_start(actor_id) if isinstance(store, CompactingStore) else None
        if start is not None and start.first_seq > run:
            return  # compacted away: the rest of the chain is checked as it is read
    else:
        try:
            if parse(found[1], key) == parsed:
                return
        except ValueError:
            pass
    raise ConfigurationError(
        f"not the reply of a run of {shown(actor_id)}: its log holds no run {run} with this reply"
    )


async def _from_snapshot(
    store: Store, actor_id: str, seqs: list[int], key: str
) -> tuple[int, list[Any]]:
    """The conversation of one of the runs ``seqs`` (newest first) from a valid snapshot
    whose state is that run's (its ``run_seq``; the conversation under ``key``), and the
    run's index in ``seqs``."""
    wanted = {seq: i for i, seq in enumerate(seqs)}
    for info in await store.list_snapshots(actor_id):
        snap = await store.load_snapshot(actor_id, info.seq)
        if snap is None or not _valid(info, snap.data):
            continue
        try:
            state = json.loads(_compact.snapshot_json(snap.data))
        except ValueError:
            continue
        if not isinstance(state, dict) or not isinstance(state.get("run_seq"), int):
            continue
        at = wanted.get(state["run_seq"])
        if at is not None and isinstance(state.get(key), list):
            return at, list(state[key])
    raise CorruptEntryError(
        actor_id,
        seqs[-1],
        "reference",
        "a run's conversation continues one that neither the log nor a snapshot holds",
    )


def _valid(info: SnapshotInfo, data: bytes) -> bool:
    return len(data) == info.size and _frames.info_digest(info, data) == info.digest


async def _steps(store: Store, actor_id: str, origin: int) -> dict[int, tuple[int, Any]]:
    """The completed runs' (step seq, reply) from ``origin`` on, by message seq."""
    rows = await store.read(actor_id, after_seq=max(origin, 1) - 1, kinds=[EntryKind.STEP])
    out: dict[int, tuple[int, Any]] = {}
    for row in rows:
        step = _decoded(actor_id, row)
        if step.ok:
            out[row.ref] = (row.seq, step.reply)
    return out


async def _step(store: Store, actor_id: str, seq: int) -> tuple[int, Any] | None:
    for row in await store.find_ref(actor_id, EntryKind.STEP, seq):
        step = _decoded(actor_id, row)
        if step.ok:
            return row.seq, step.reply
    return None


async def _incarnation(store: Store, actor_id: str, seq: int) -> str | None:
    """The incarnation id ([F13]) of the message at ``seq`` (None: none there, or one
    logged before incarnations existed)."""
    for row in await store.read(actor_id, after_seq=seq - 1, upto_seq=seq):
        _frames.verify_row(row, actor_id, row.seq)
        message = decode_entry(row)
        if isinstance(message, MessageRecord):
            return message.incarnation
    return None


def _decoded(actor_id: str, row: Any) -> StepRecord:
    _frames.verify_row(row, actor_id, row.seq)
    step = decode_entry(row)
    if not isinstance(step, StepRecord):
        raise CorruptEntryError(actor_id, row.seq, "decode", "not a step")
    return step


def check_call(system: object, timeout: object) -> None:
    """A run's ``system`` and ``timeout=``, checked before anything is sent. Raises
    ``ConfigurationError``."""
    if not isinstance(system, ActorSystem):
        raise ConfigurationError(f"system must be an ActorSystem, not {shown(system)}")
    check_timeout(timeout)


def check_run(what: str, text: object, new_conversation: object) -> None:
    """A run's user message ``text`` (named ``what``) and ``new_conversation``, checked
    before anything is sent. Raises ``ConfigurationError``."""
    if not isinstance(text, str):
        raise ConfigurationError(f"{what} must be the user's message as a str: {shown(text)}")
    if not isinstance(new_conversation, bool):
        raise ConfigurationError(f"new_conversation must be a bool: {shown(new_conversation)}")


def answers(
    results: object, approvals: object, jsonable: Callable[[Any], Any]
) -> tuple[dict[str, Any] | None, dict[str, bool] | None]:
    """``answer``'s deferred ``results`` (by tool call id, each made plain JSON by
    ``jsonable``) and ``approvals`` (by tool call id, True or False), checked before
    anything is sent. Raises ``ConfigurationError``."""
    for name, given in (("results", results), ("approvals", approvals)):
        if given is not None and not isinstance(given, Mapping):
            raise ConfigurationError(f"{name} must map tool call ids, not {shown(given)}")
        for key, value in (given or {}).items():
            if not isinstance(key, str):
                raise ConfigurationError(f"{name}: a tool call id is a str, not {shown(key)}")
            if name == "approvals" and not isinstance(value, bool):
                raise ConfigurationError(f"approvals[{shown(key)}] must be True or False")
    try:
        plain = jsonable(dict(results)) if results else None  # type: ignore[call-overload]
    except Exception as exc:
        raise ConfigurationError(f"results must be JSON-encodable: {exc}") from None
    return plain, dict(approvals) if approvals else None  # type: ignore[call-overload]


async def result_of(
    system: ActorSystem,
    actor_id: str,
    reply: Any,
    key: str,
    build: Callable[[dict[str, Any], list[Any]], R],
) -> R:
    """``build(reply, its whole conversation)``, for a reply a caller hands in
    (``DurableAgent.result``): ``ConfigurationError`` for a ``system``, an ``actor_id`` or a
    ``reply`` that is not one (nothing is read or written for them)."""
    check_call(system, None)
    if not validate_text(actor_id, "actor_id"):
        raise ConfigurationError("actor_id must not be empty")
    try:
        return build(reply, await whole(system.store, actor_id, reply, key))
    except ActorlogError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigurationError(
            f"not the reply of a durable agent's run: {shown(reply)} ({exc})"
        ) from None
