"""Checking a whole store: every checksum, seq chain, reference between entries, summary
row and snapshot digest."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

from .._journal import codec as _codec
from .._journal.errors import (
    ActorNotFoundError,
    ConfigurationError,
    CorruptEntryError,
    StoreCorruptError,
)
from .._journal.records import EntryKind
from ..store import ActorRow, CompactingStore, IntegrityCheckingStore, Store
from .models import (
    Finding,
    VerifyReport,
)
from .reads import (
    _CHUNK,
    _check,
    _reading,
    _snapshot_problem,
)

Progress = Callable[[str, int, int], None]


async def verify(
    store: Store, actor_id: str | None = None, *, progress: Progress | None = None
) -> VerifyReport:
    """Check every entry's checksum, the seq chain, references between entries, that no
    message id appears twice in one log, each actor's summary row and every snapshot's
    digest; then the database engine's own check of the store's files, if the store has one
    (``IntegrityCheckingStore``: SQLite's ``PRAGMA integrity_check``, also with
    ``actor_id``, since it checks the whole file). Damage is returned as findings, not
    raised: an actor whose rows the engine cannot read (``StoreCorruptError``) is a finding
    of that actor, and the others are still checked.

    Safe on a live store: each actor is read in one consistent read (the store's optional
    ``reading()``: one SQLite read transaction, one PostgreSQL REPEATABLE READ transaction),
    so a runtime appending meanwhile is never reported as damage.

    Args:
        actor_id: check only this actor.
        progress: called as ``progress(actor_id, entries_done, entries_total)`` every chunk.

    Raises:
        ActorNotFoundError: ``actor_id`` does not exist.
        StoreUnavailableError: the store could not be read.
        ConfigurationError: ``progress`` is not a callable that takes
            ``(actor_id, done, total)`` (checked before anything is read).
    """
    if progress is not None:
        _check_progress(progress)
    if actor_id is None:
        actors = await store.list_actors()  # lenient: a damaged summary row is a finding
    else:
        try:
            one = await store.get_actor(actor_id)
        except CorruptEntryError:  # its summary row is damaged: the listing carries it
            one = next((a for a in await store.list_actors() if a.actor_id == actor_id), None)
        if one is None:
            raise ActorNotFoundError(f"no actor {actor_id!r} in {store.url}")
        actors = [one]
    total = sum(max(0, a.last_seq - a.first_seq + 1) for a in actors if a.last_seq)
    report = VerifyReport(limits=[str(x) for x in getattr(store, "verify_limits", ())])
    done = 0

    def tick(aid: str, n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(aid, done, max(total, done))

    for listed in actors:
        try:
            async with _reading(store) as (view, consistent):
                # the row again inside the consistent read (the listing may be older)
                a = listed if listed.damage is not None else await view.get_actor(listed.actor_id)
                if a is None:  # pragma: no cover - actors are never deleted
                    continue
                await _verify_actor(view, a, consistent, report, tick)
        except StoreCorruptError as exc:  # a page of this actor's the engine cannot read
            report.findings.append(Finding(listed.actor_id, "actor", 0, "integrity", exc.reason))
    if isinstance(store, IntegrityCheckingStore):
        for line in await store.check_integrity():
            report.findings.append(Finding("", "store", 0, "integrity", line))
    return report


async def refuse_damaged(store: Store, actor_id: str, doing: str, *, hint: str = "") -> None:
    """Refuse an operator write (``doing``: ``restart``, ``cancel``, ...) to an actor whose
    log is damaged: an entry (checksum, seq chain, reference, ...) or its summary row, as
    :func:`verify` finds it (a damaged snapshot is not: recovery falls back past it).

    Raises:
        ConfigurationError: the damage, named (seq, check); nothing was written.
        ActorNotFoundError: no such actor.
    """
    found = [f for f in (await verify(store, actor_id)).findings if f.where != "snapshot"]
    if not found:
        return
    first = found[0]
    where = f"seq {first.seq}" if first.where == "entry" else first.where
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    raise ConfigurationError(
        f"actor {actor_id!r} has a damaged log: {where} failed the {first.check} check: "
        f"{first.detail}{more}. {doing} refused, nothing written: run 'actorlog verify' and "
        f"deal with the damage first (docs/operators.md, 'Damage'){hint}"
    )


async def _verify_actor(
    store: Store,
    a: ActorRow,
    consistent: bool,
    report: VerifyReport,
    tick: Callable[[str, int], None],
) -> None:
    report.actors += 1
    aid = a.actor_id
    if not _is_time(a.created_at):
        report.findings.append(
            Finding(aid, "actor", 0, "summary", f"created_at is not a time: {a.created_at!r}")
        )
    messages: set[int] = set()
    message_ids: dict[str, int] = {}  # a message id -> the seq of its message
    intents: set[int] = set()
    damaged: set[int] = set()  # no reference findings for what refers to these
    last_message = 0
    handled = 0
    after = 0
    if a.damage is not None:  # its summary row cannot be read: nothing to compare
        report.findings.append(Finding(aid, "actor", 0, "column type", a.damage))
    start = await _log_start(store, a, report)
    expected = start
    while True:
        bad: CorruptEntryError | None = None
        try:
            rows = await store.read(aid, after_seq=after, limit=_CHUNK)
        except CorruptEntryError as exc:  # a row the store could not even build
            bad, rows = exc, []
            if exc.seq > after + 1:  # the rows before it, then go on after it
                try:
                    rows = await store.read(aid, after_seq=after, upto_seq=exc.seq - 1)
                except CorruptEntryError:
                    rows = []
        for r in rows:
            report.entries += 1
            if r.seq != expected:
                report.findings.append(
                    Finding(
                        aid,
                        "entry",
                        expected,
                        "seq chain",
                        f"seqs {expected}..{r.seq - 1} are missing"
                        if r.seq > expected
                        else f"seq {r.seq} out of order",
                    )
                )
                damaged.update(range(expected, r.seq))
            expected = r.seq + 1
            _, err = _check(r, aid)
            if err is not None:
                report.findings.append(Finding(aid, "entry", r.seq, err.check, err.detail))
                damaged.add(r.seq)
                continue
            if r.ref in damaged:
                continue
            problem = None
            if r.kind == EntryKind.MESSAGE:
                messages.add(r.seq)
                last_message = r.seq
                if r.message_id is not None:
                    first = message_ids.setdefault(r.message_id, r.seq)
                    if first != r.seq:  # the store's unique index should have refused it
                        detail = f"message id {r.message_id!r} is also the id of seq {first}"
                        report.findings.append(Finding(aid, "entry", r.seq, "message id", detail))
            elif r.kind in (EntryKind.INTENT, EntryKind.EFFECT, EntryKind.STEP):
                if r.ref not in messages and r.ref >= start:
                    problem = f"{r.kind} refers to seq {r.ref}, which is not an earlier message"
                if r.kind == EntryKind.INTENT:
                    intents.add(r.seq)
                if r.kind == EntryKind.STEP:
                    handled = max(handled, r.ref)
            elif r.ref not in intents and r.ref >= start:
                problem = f"{r.kind} refers to seq {r.ref}, which is not an earlier intent"
            if problem is not None:
                report.findings.append(Finding(aid, "entry", r.seq, "reference", problem))
        tick(aid, len(rows))
        if bad is not None:
            report.findings.append(Finding(aid, "entry", bad.seq, bad.check, bad.detail))
            damaged.add(bad.seq)
            if bad.seq <= max(after, expected - 1):
                break
            after, expected = bad.seq, bad.seq + 1
            continue
        if len(rows) < _CHUNK:
            break
        after = rows[-1].seq
    log_end = expected - 1
    summary: ActorRow | None = a
    if not consistent and log_end != a.last_seq:
        # no consistent read: a runtime may have appended while the log was scanned; only a
        # summary that still disagrees when read again after the scan is damage
        again = await store.get_actor(aid)
        if again is not None and a.last_seq <= log_end <= again.last_seq:
            summary = again if again.last_seq == log_end else None
    if a.damage is not None or summary is None:
        pass  # damaged, or still being written: the summary cannot be compared
    elif log_end != summary.last_seq:
        report.findings.append(
            Finding(
                aid,
                "actor",
                summary.last_seq,
                "seq chain",
                f"the log ends at seq {log_end} but the actor's summary says {summary.last_seq}",
            )
        )
    elif (summary.last_message_seq, summary.handled_seq) != (last_message, handled):
        report.findings.append(
            Finding(
                aid,
                "actor",
                0,
                "summary",
                f"summary says last message {summary.last_message_seq}, handled "
                f"{summary.handled_seq}; the log says {last_message}, {handled}",
            )
        )
    for info in await store.list_snapshots(aid):
        report.snapshots += 1
        snap_problem = await _snapshot_problem(store, info, max(a.last_seq, log_end))
        if snap_problem == "missing" and not consistent:
            continue  # deleted by the runtime between listing and loading
        if snap_problem is None and not _is_time(info.created_at):
            snap_problem = f"created_at is not a time: {info.created_at!r}"
        if snap_problem is not None:
            report.findings.append(
                Finding(
                    aid,
                    "snapshot",
                    info.seq,
                    "digest" if "digest" in snap_problem or "size" in snap_problem else "snapshot",
                    snap_problem,
                )
            )


async def _log_start(store: Store, a: ActorRow, report: VerifyReport) -> int:
    """[F16] Where the actor's log must start: 1, or the first seq of a log start record
    whose checksum verifies (recorded in ``report.compacted``). A log that starts later
    without one, or a record that does not verify, is a finding."""
    aid = a.actor_id
    ls = await store.log_start(aid) if isinstance(store, CompactingStore) else None
    first = a.first_seq if a.damage is None and isinstance(a.first_seq, int) else 0
    if ls is None:
        if first > 1:
            report.findings.append(
                Finding(
                    aid,
                    "actor",
                    first,
                    "log start",
                    f"the log starts at seq {first} but no compaction is recorded: "
                    f"seqs 1..{first - 1} are missing",
                )
            )
        return 1
    ok = isinstance(ls.first_seq, int) and ls.first_seq >= 1
    if not ok or ls.checksum != _codec.log_start_checksum(aid, ls.first_seq):
        report.findings.append(
            Finding(aid, "actor", 0, "log start", "the log start record's checksum is wrong")
        )
        return max(first, 1)
    if a.damage is None and first != ls.first_seq:
        report.findings.append(
            Finding(
                aid,
                "actor",
                0,
                "summary",
                f"summary says the log starts at seq {first}; the log start record says "
                f"{ls.first_seq}",
            )
        )
    report.compacted[aid] = ls.first_seq
    return ls.first_seq


def _is_time(value: object) -> bool:
    """A stored Unix time that damage has not made NaN or infinite."""
    return isinstance(value, int | float) and math.isfinite(value)


def _check_progress(progress: object) -> None:
    """``progress=`` must be callable with ``(actor_id, done, total)``."""
    wrong = True
    if callable(progress):
        wrong = False
        try:
            inspect.signature(progress).bind("actor", 0, 0)
        except TypeError:
            wrong = True
        except ValueError:  # no signature to read (a builtin): called as it is
            pass
    if wrong:
        raise ConfigurationError(
            "progress must be a callable taking (actor_id, done, total) or None, not "
            f"{_codec.shown(progress)}"
        )
