"""Corruption: damage log entries and snapshots at rest, then recover.

The damage is done under the store: with ``sqlite3`` UPDATE/DELETE on the real SQLite file
(payload, checksum, seq and every other column) and with ``MemoryStore.replace_row`` /
``replace_snapshot``. Both stores are transactional, so every damaged entry is corruption,
the last one too (DESIGN.md section 5).

The one rule, checked for every damage: recovery either reaches exactly the state of an
undamaged recovery (it fell back to an older valid snapshot, or the damage lies where
recovery need not read), or it stops that actor with ``ActorQuarantinedError`` whose
``__cause__`` is a ``CorruptEntryError`` naming the actor, a damaged seq and the check that
failed -- and then nothing in its log was cut or rewritten. The other actor always recovers.
Never a wrong state, never a lost acknowledged message.
"""

from __future__ import annotations

import collections
import copy
import random
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import hypothesis
import pytest
from actorlog import ActorQuarantinedError, ActorSystem, Context, CorruptEntryError
from actorlog._journal.codec import encode_plain, make_row, type_tag
from actorlog._journal.records import message_payload
from actorlog.store import KINDS, EntryRow, SnapshotInfo, Store
from actorlog.stores import MemoryStore, SqliteStore
from hypothesis import strategies as st

from .conftest import BASE_SEED, FIGURES, soak
from .helpers import Add, Counter, Get

CHECKS = {"checksum", "seq chain", "identity", "kind", "decode", "reference"}
ENTRY_OPS = (
    "flip",
    "truncate",
    "zero",
    "duplicate",
    "checksum",
    "seq",
    "delete",
    "kind",
    "type_tag",
    "ref",
    "ref_sign",
    "message_id",
    "actor_id",
)
SNAPSHOT_OPS = ("flip", "truncate", "zero", "duplicate", "digest", "size", "type_tag", "schema")


@attrs.frozen
class Damage:
    """One damage: ``target`` is "entry" or "snapshot"; ``pick`` chooses which one (taken
    modulo the count); ``pos``/``length``/``bit`` parameterize byte-level ops."""

    target: str
    op: str
    pick: int
    pos: int = 0
    length: int = 1
    bit: int = 0


def damage_bytes(data: bytes, d: Damage) -> bytes:
    if not data:
        return b"\x00" if d.op in ("flip", "zero", "duplicate") else data
    i = d.pos % len(data)
    if d.op == "flip":
        return data[:i] + bytes([data[i] ^ (1 << (d.bit % 8))]) + data[i + 1 :]
    if d.op == "truncate":
        return data[:i]
    if d.op == "zero":
        n = max(1, d.length)
        zeroed = data[:i] + b"\x00" * n + data[i + n :]
        return zeroed[: len(data)] if zeroed != data else data[:i] + b"\x01" + data[i + 1 :]
    if d.op == "duplicate":
        n = max(1, d.length)
        return data[: i + n] + data[i : i + n] + data[i + n :]
    raise ValueError(d.op)


# -- building the undamaged store -----------------------------------------------------------


async def build(store: Store) -> None:
    """Two actors; the victim gets bursts of messages (so snapshots are taken with
    messages still waiting, the (handled_seq, seq] case) and ends with two acknowledged
    messages that no step has handled yet."""
    async with ActorSystem(store, actors=[Counter]) as system:
        victim = await system.spawn(Counter, "victim")  # snapshot_every=3, keep=3
        bystander = await system.spawn(Counter, "bystander")
        n = 0
        for _ in range(5):
            for _ in range(4):
                n += 1
                await victim.send(Add(n), message_id=f"m{n}")
            await victim.ask(Get())
            await bystander.ask(Add(n))
    # acknowledged, never handled: appended exactly as ``send`` appends them
    await store.open()
    last = (await store.read("victim"))[-1].seq
    rows = []
    for i, k in enumerate((101, 102), start=1):
        payload = message_payload({"n": k, "note": ""}, sender=None, trace=None)
        rows.append(
            make_row(
                "victim", last + i, "message", type_tag(Add), 0, f"p{k}", encode_plain(payload, "")
            )
        )
    await store.append("victim", last, rows)
    await store.close()


@attrs.define
class Recovered:
    states: dict[str, Any]  # actor -> state (absent: quarantined)
    cause: BaseException | None
    rows_before: list[EntryRow]
    rows_after: list[EntryRow]


async def recover(store: Store) -> Recovered:
    await store.open()
    rows_before = await store.read("victim")
    await store.close()
    states: dict[str, Any] = {}
    cause: BaseException | None = None
    with anyio.fail_after(60):
        async with ActorSystem(store, actors=[Counter]) as system:
            for actor_id in ("victim", "bystander"):
                try:
                    ref = await system.spawn(Counter, actor_id)
                    states[actor_id] = await ref.ask(Get(), timeout=30)
                except ActorQuarantinedError as exc:
                    assert actor_id == "victim", f"the bystander was hurt: {exc!r}"
                    assert system.status(actor_id) == "quarantined"
                    cause = exc.__cause__
            rows_after = await system.store.read("victim")
    return Recovered(states, cause, rows_before, rows_after)


def judge(ref: Recovered, got: Recovered, damaged_seqs: set[int]) -> None:
    """The rule of this module (see the docstring)."""
    assert got.states.get("bystander") == ref.states["bystander"]
    if "victim" in got.states:
        assert got.states["victim"] == ref.states["victim"], "recovered a wrong state"
        # no message handled twice: the steps this recovery wrote are all for new messages
        before = {r.ref for r in got.rows_before if r.kind == "step"}
        new = [r.ref for r in got.rows_after[len(got.rows_before) :] if r.kind == "step"]
        counts = collections.Counter(new)
        again = sorted({ref for ref in new if ref in before or counts[ref] > 1})
        assert not again, f"messages handled again: {again}"
        return
    cause = got.cause
    assert isinstance(cause, CorruptEntryError), f"quarantined without naming damage: {cause!r}"
    assert cause.actor_id == "victim"
    assert cause.check in CHECKS, cause
    # (a memory-store row whose seq field was negated is named by the seq it claims)
    named = cause.seq if cause.seq in damaged_seqs else -cause.seq
    assert named in damaged_seqs, f"names seq {cause.seq}, damaged {sorted(damaged_seqs)}"
    assert str(cause.seq) in str(cause) and "victim" in str(cause)
    assert got.rows_after == got.rows_before, "recovery cut or rewrote the damaged log"


# -- damaging a SQLite file -------------------------------------------------------------------


def sqlite_damage(path: Path, damages: list[Damage]) -> set[int]:
    """Apply the damages with sqlite3; return the seqs of the damaged victim entries."""
    db = sqlite3.connect(path, isolation_level=None)
    damaged: set[int] = set()
    try:
        for d in damages:
            if d.target == "entry":
                seqs = [
                    r[0]
                    for r in db.execute(
                        "SELECT seq FROM entries WHERE actor_id='victim' AND seq > 0 ORDER BY seq"
                    )
                ]
                seq = seqs[d.pick % len(seqs)]
                try:
                    _sqlite_entry(db, seq, d)
                except sqlite3.IntegrityError:
                    continue  # e.g. a second move onto the same key: that damage cannot be
                damaged.add(seq)
            else:
                seqs = [
                    r[0]
                    for r in db.execute(
                        "SELECT seq FROM snapshots WHERE actor_id='victim' ORDER BY seq DESC"
                    )
                ]
                if seqs:
                    _sqlite_snapshot(db, seqs[d.pick % len(seqs)], d)
    finally:
        db.close()
    return damaged


def _format5(db: sqlite3.Connection) -> bool:
    """Whether the file's log is format 5's rowid table ([F24])."""
    log = db.execute("SELECT sql FROM sqlite_master WHERE name = 'log'").fetchall()
    return bool(log) and "WITHOUT ROWID" not in log[0][0]


def _sqlite_entry(db: sqlite3.Connection, seq: int, d: Damage) -> None:
    where = " WHERE actor_id='victim' AND seq=?"
    kind, tag, ref, mid, payload, checksum = db.execute(
        "SELECT kind, type_tag, ref, message_id, payload, checksum FROM entries" + where, (seq,)
    ).fetchone()
    if d.op in ("flip", "truncate", "zero", "duplicate"):
        db.execute("UPDATE entries SET payload=?" + where, (damage_bytes(bytes(payload), d), seq))
    elif d.op == "checksum":
        db.execute("UPDATE entries SET checksum=?" + where, (checksum ^ (1 << (d.bit % 32)), seq))
    elif d.op == "seq" and _format5(db):
        # the view refuses a seq outside 1 .. 2**32 - 1 ([F24]): the row's rowid moved by
        # hand instead, to seq 0 of its actor, which no read takes (a gap where it was, as
        # the negated seq of the other layouts; a second move onto it cannot be)
        db.execute(
            "UPDATE log SET id = id - ? WHERE id = "
            "((SELECT id FROM actors WHERE actor_id = 'victim') << 32) + ?",
            (seq, seq),
        )
    elif d.op == "seq":
        db.execute("UPDATE entries SET seq=?" + where, (-seq, seq))
    elif d.op == "delete":
        db.execute("DELETE FROM entries" + where, (seq,))
    elif d.op == "kind":
        other = [k for k in KINDS if k != kind][d.bit % (len(KINDS) - 1)]
        db.execute("UPDATE entries SET kind=?" + where, (other, seq))
    elif d.op == "type_tag":
        db.execute("UPDATE entries SET type_tag=?" + where, (tag + "x", seq))
    elif d.op == "ref":
        db.execute("UPDATE entries SET ref=?" + where, (ref + 1 + d.bit % 3, seq))
    elif d.op == "ref_sign":  # the sign bit flipped
        db.execute("UPDATE entries SET ref=?" + where, (-ref - 1, seq))
    elif d.op == "message_id":
        db.execute("UPDATE entries SET message_id=?" + where, ((mid or "") + "x", seq))
    elif d.op == "actor_id":
        log = db.execute("SELECT sql FROM sqlite_master WHERE name = 'log'").fetchall()
        if _format5(db):
            # format 5: the actor's half of the row's rowid turned into one no actor has
            db.execute(
                "UPDATE log SET id = id + (1000000 << 32) WHERE id = "
                "((SELECT id FROM actors WHERE actor_id = 'victim') << 32) + ?",
                (seq,),
            )
        elif log:
            # formats 3 and 4: the row's actor key turned into one no actor has
            db.execute(
                "UPDATE log SET actor = actor + 1000000 WHERE seq = ? AND actor = "
                "(SELECT id FROM actors WHERE actor_id = 'victim')",
                (seq,),
            )
        else:
            db.execute("UPDATE entries SET actor_id='elsewhere'" + where, (seq,))
    else:
        raise ValueError(d.op)


def _sqlite_snapshot(db: sqlite3.Connection, seq: int, d: Damage) -> None:
    where = " WHERE actor_id='victim' AND seq=?"
    data, digest = db.execute("SELECT data, digest FROM snapshots" + where, (seq,)).fetchone()
    if d.op in ("flip", "truncate", "zero", "duplicate"):
        db.execute("UPDATE snapshots SET data=?" + where, (damage_bytes(bytes(data), d), seq))
    elif d.op == "digest":
        dd = damage_bytes(bytes(digest), Damage("snapshot", "flip", 0, d.pos, 1, d.bit))
        db.execute("UPDATE snapshots SET digest=?" + where, (dd, seq))
    elif d.op == "size":
        db.execute("UPDATE snapshots SET size=size+1" + where, (seq,))
    elif d.op == "type_tag":
        db.execute("UPDATE snapshots SET type_tag=type_tag||'x'" + where, (seq,))
    elif d.op == "schema":
        db.execute("UPDATE snapshots SET schema_version=schema_version+1" + where, (seq,))
    else:
        raise ValueError(d.op)


# -- damaging a MemoryStore -------------------------------------------------------------------


def memory_damage(store: MemoryStore, damages: list[Damage]) -> set[int]:
    a = store.actors["victim"]
    damaged: set[int] = set()
    for d in damages:
        if d.target == "entry":
            i = d.pick % len(a.entries)
            row = a.entries[i]
            seq = a.seqs[i]
            damaged.add(seq)
            store.replace_row("victim", seq, _memory_entry(row, d))
        elif a.snapshots:
            seqs = sorted(a.snapshots, reverse=True)
            seq = seqs[d.pick % len(seqs)]
            snap = a.snapshots[seq]
            if d.op in ("flip", "truncate", "zero", "duplicate"):
                store.replace_snapshot("victim", seq, damage_bytes(snap.data, d))
            else:
                a.snapshots[seq] = attrs.evolve(snap, info=_memory_info(snap.info, d))
    return damaged


def _memory_entry(row: EntryRow, d: Damage) -> EntryRow:
    if d.op in ("flip", "truncate", "zero", "duplicate"):
        return attrs.evolve(row, payload=damage_bytes(row.payload, d))
    if d.op == "checksum":
        return attrs.evolve(row, checksum=row.checksum ^ (1 << (d.bit % 32)))
    if d.op in ("seq", "delete"):  # a memory store has no gap to make: a wrong seq instead
        return attrs.evolve(row, seq=-row.seq)
    if d.op == "kind":
        return attrs.evolve(row, kind=[k for k in KINDS if k != row.kind][d.bit % 5])
    if d.op == "type_tag":
        return attrs.evolve(row, type_tag=row.type_tag + "x")
    if d.op == "ref":
        return attrs.evolve(row, ref=row.ref + 1 + d.bit % 3)
    if d.op == "ref_sign":
        return attrs.evolve(row, ref=-row.ref - 1)
    if d.op == "message_id":
        return attrs.evolve(row, message_id=(row.message_id or "") + "x")
    if d.op == "actor_id":
        return attrs.evolve(row, actor_id="elsewhere")
    raise ValueError(d.op)


def _memory_info(info: SnapshotInfo, d: Damage) -> SnapshotInfo:
    if d.op == "digest":
        return attrs.evolve(info, digest=damage_bytes(info.digest, Damage("s", "flip", 0, d.pos)))
    if d.op == "size":
        return attrs.evolve(info, size=info.size + 1)
    if d.op == "type_tag":
        return attrs.evolve(info, type_tag=info.type_tag + "x")
    if d.op == "schema":
        return attrs.evolve(info, schema_version=info.schema_version + 1)
    raise ValueError(d.op)


# -- fixtures: one undamaged store per kind, copied for every damage --------------------------


@attrs.define
class Base:
    kind: str
    path: Path | None
    memory: MemoryStore | None
    reference: Recovered
    snapshot_seq: int  # newest snapshot
    handled_seq: int  # the last message its state reflects
    kinds: dict[int, str]  # victim seq -> entry kind

    def fresh(self, tmp: Path) -> tuple[Store, Callable[[list[Damage]], set[int]]]:
        if self.memory is not None:
            mem = MemoryStore()
            mem.actors = copy.deepcopy(self.memory.actors)
            return mem, lambda ds: memory_damage(mem, ds)
        assert self.path is not None
        target = tmp / "agents.db"
        shutil.copyfile(self.path, target)
        return SqliteStore(target), lambda ds: sqlite_damage(target, ds)


async def _make_base(kind: str, tmp: Path) -> Base:
    if kind == "memory":
        mem = MemoryStore()
        await build(mem)
        base = Base(kind, None, mem, Recovered({}, None, [], []), 0, 0, {})
        store: Store = mem
    else:
        path = tmp / "base.db"
        await build(SqliteStore(path))
        con = sqlite3.connect(path)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        base = Base(kind, path, None, Recovered({}, None, [], []), 0, 0, {})
        store = SqliteStore(path)
    await store.open()
    base.kinds = {r.seq: r.kind for r in await store.read("victim")}
    (newest, *_) = await store.list_snapshots("victim")
    await store.close()
    base.snapshot_seq, base.handled_seq = newest.seq, newest.handled_seq
    (tmp / "ref").mkdir()
    undamaged, _ = base.fresh(tmp / "ref")
    base.reference = await recover(undamaged)
    assert set(base.reference.states) == {"victim", "bystander"}
    assert base.reference.states["victim"]["seen"] == [*range(1, 21), 101, 102]
    # the case the index path exists for: messages logged before the snapshot, unhandled
    assert any(
        k == "message" and base.handled_seq < s <= base.snapshot_seq for s, k in base.kinds.items()
    ), "the build left no unhandled message under the newest snapshot"
    return base


_bases: dict[str, Base] = {}


def base_for(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Base:
    if kind not in _bases:
        tmp = tmp_path_factory.mktemp(f"base-{kind}")
        _bases[kind] = anyio.run(_make_base, kind, tmp, backend=backend_of(kind))
    return _bases[kind]


def run_damaged(base: Base, tmp: Path, damages: list[Damage]) -> tuple[Recovered, set[int]]:
    store, apply = base.fresh(tmp)
    damaged = apply(damages)

    async def go() -> Recovered:
        return await recover(store)

    FIGURES["corruptions tried"] += 1
    return anyio.run(go, backend=backend_of(base.kind)), damaged


def backend_of(kind: str) -> str:
    """``sqlite-trio``: the SQLite file built and recovered on trio; the others on asyncio."""
    return "trio" if kind == "sqlite-trio" else "asyncio"


# -- the tests --------------------------------------------------------------------------------

#: the store kinds; ``sqlite-trio`` runs every damage case of ``sqlite`` on trio (the random
#: one with fewer examples: the same code, the other backend)
STORES = ["memory", "sqlite", "sqlite-trio"]


def _some_seqs(base: Base, op: str) -> list[int]:
    """The entries to damage one by one: in a soak every one; in CI the interesting ones
    (first, last, both sides of the newest snapshot, the unhandled messages under it) and
    a seeded sample of the rest."""
    seqs = sorted(base.kinds)
    if soak(1) > 1:
        return seqs
    s, h = base.snapshot_seq, base.handled_seq
    pick = {seqs[0], seqs[-1], seqs[-2], s, s + 1, h}
    pick |= {q for q in seqs if base.kinds[q] == "message" and h < q <= s}
    rng = random.Random(BASE_SEED + sum(map(ord, op)))
    pick |= set(rng.sample(seqs, 6))
    return sorted(q for q in pick if q in base.kinds)


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("op", ENTRY_OPS)
def test_every_damaged_entry_recovery_reads_is_named(
    kind: str, op: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Damage each entry of the victim's log in turn with ``op``: an entry recovery reads
    (after the newest snapshot, or a message it reflects as unhandled) must stop the actor
    naming exactly that seq; an entry it does not need leaves the state intact. The last
    entry is no exception (a transactional store never tears)."""
    base = base_for(kind, tmp_path_factory)
    for seq in _some_seqs(base, op):
        entry_kind = base.kinds[seq]
        case = tmp_path / f"{seq}"
        case.mkdir()
        d = Damage("entry", op, pick=seq - 1, pos=seq * 7, length=3, bit=seq)
        got, damaged = run_damaged(base, case, [d])
        assert damaged == {seq}
        judge(base.reference, got, damaged)
        read = seq > base.snapshot_seq or (
            entry_kind == "message" and base.handled_seq < seq <= base.snapshot_seq
        )
        if read:
            assert "victim" not in got.states, (
                f"{kind}: {op} on {entry_kind} seq {seq} (snapshot {base.snapshot_seq}, "
                f"handled {base.handled_seq}) was not detected"
            )


@pytest.mark.parametrize("kind", STORES)
@pytest.mark.parametrize("op", SNAPSHOT_OPS)
def test_damaged_snapshots_fall_back_to_older_ones_and_reach_the_same_state(
    kind: str, op: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    base = base_for(kind, tmp_path_factory)
    for n in (1, 2, 3):  # the newest, the newest two, all three
        case = tmp_path / str(n)
        case.mkdir()
        got, _ = run_damaged(base, case, [Damage("snapshot", op, i, 5 + i, 2, i) for i in range(n)])
        assert got.states == base.reference.states


@pytest.mark.parametrize("kind", STORES)
def test_damaged_snapshot_and_entry_in_its_fallback_tail_stops_the_actor(
    kind: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The newest snapshot is damaged, so recovery falls back and must now read an entry
    the newest one covered: that entry's damage is found, not skipped."""
    base = base_for(kind, tmp_path_factory)
    seq = base.snapshot_seq  # covered by the newest snapshot, read after falling back
    got, damaged = run_damaged(
        base,
        tmp_path,
        [Damage("snapshot", "flip", 0, 3, 1, 1), Damage("entry", "flip", seq - 1, 4, 1, 2)],
    )
    judge(base.reference, got, damaged)
    assert "victim" not in got.states


def _damages(target: str, ops: tuple[str, ...]) -> st.SearchStrategy[Damage]:
    return st.builds(
        Damage,
        target=st.just(target),
        op=st.sampled_from(ops),
        pick=st.integers(0, 10_000),
        pos=st.integers(0, 10_000),
        length=st.integers(1, 16),
        bit=st.integers(0, 63),
    )


_damage = st.one_of(_damages("entry", ENTRY_OPS), _damages("snapshot", SNAPSHOT_OPS))


@pytest.mark.parametrize("kind", STORES)
def test_random_damage_never_yields_a_wrong_state_or_loses_a_message(
    kind: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Hypothesis: 1-4 random damages (entries and snapshots, any op) per example."""
    base = base_for(kind, tmp_path_factory)

    @hypothesis.seed(BASE_SEED)
    @hypothesis.settings(
        max_examples=soak({"memory": 60, "sqlite": 40}.get(kind, 15)),
        deadline=None,
        database=None,
        suppress_health_check=[hypothesis.HealthCheck.too_slow],
    )
    @hypothesis.given(damages=st.lists(_damage, min_size=1, max_size=4))
    def check(damages: list[Damage]) -> None:
        case = tmp_path_factory.mktemp("case")
        got, damaged = run_damaged(base, case, damages)
        judge(base.reference, got, damaged)

    check()


HOLD = {"on": True}


class Slow(Counter):
    """Slow first steps (so messages queue up under the first snapshot), then holds on
    message 4 while ``HOLD["on"]`` (so the crash leaves 4 and 5 unhandled)."""

    __actorlog_tag__ = "torture.Slow"

    async def receive(self, ctx: Context, msg: Add | Get) -> Any:
        if isinstance(msg, Add) and msg.n <= 3:
            await anyio.sleep(0.05)
        if isinstance(msg, Add) and msg.n == 4 and HOLD["on"]:
            await anyio.sleep_forever()
        return await super().receive(ctx, msg)


@pytest.mark.parametrize(
    ("kind", "op"),
    [
        ("memory", "kind"),
        ("memory", "seq"),
        ("sqlite", "kind"),
        ("sqlite", "seq"),
        ("sqlite", "delete"),
        ("sqlite", "actor_id"),
        ("sqlite", "flip"),
    ],
)
def test_damaged_unhandled_message_under_the_snapshot_is_found(
    kind: str, op: str, tmp_path: Path
) -> None:
    """Messages 4 and 5 were logged before the snapshot taken after step 3 and never
    handled (the process died in step 4). Message 5 is then damaged so that a lookup by
    kind or seq no longer finds it: recovery must say so, not quietly drop it."""
    path = tmp_path / "agents.db"
    mem = MemoryStore()

    def store() -> Store:
        return mem if kind == "memory" else SqliteStore(path)

    async def build_slow() -> tuple[int, int]:
        HOLD["on"] = True
        async with ActorSystem(store(), actors=[Slow], shutdown_grace=0.1) as system:
            ref = await system.spawn(Slow, "victim", snapshot_every=3)
            for n in range(1, 6):
                await ref.send(Add(n), message_id=f"m{n}")
            while not await system.store.list_snapshots("victim"):
                await anyio.sleep(0.01)
            (snap,) = await system.store.list_snapshots("victim")
            m5 = await system.store.find_message("victim", "m5")
            assert m5 is not None
        return snap.handled_seq, m5.seq

    handled, seq5 = anyio.run(build_slow, backend="asyncio")
    assert handled < seq5  # message 5 lies under the snapshot, unhandled
    damage = Damage("entry", op, pick=seq5 - 1, pos=3, bit=1)
    if kind == "memory":
        memory_damage(mem, [damage])
    else:
        sqlite_damage(path, [damage])
    HOLD["on"] = False

    async def recover_slow() -> BaseException | list[int]:
        async with ActorSystem(store(), actors=[Slow]) as system:
            try:
                ref = await system.spawn(Slow, "victim")
                seen: list[int] = (await ref.ask(Get(), timeout=30))["seen"]
                return seen
            except ActorQuarantinedError as exc:
                assert exc.__cause__ is not None
                return exc.__cause__

    FIGURES["corruptions tried"] += 1
    got = anyio.run(recover_slow, backend="asyncio")
    assert isinstance(got, CorruptEntryError), f"message 5 was silently lost: handled {got}"
    assert got.actor_id == "victim" and abs(got.seq) == seq5


@pytest.mark.parametrize("column", ["handled_seq", "seq"])
def test_damaged_snapshot_metadata_is_detected(
    column: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Move the newest snapshot's handled_seq back to an earlier message (or its seq
    forward past steps it does not reflect): either a fallback to an older snapshot with
    the same state, or a named error -- never messages handled twice."""
    base = base_for("sqlite", tmp_path_factory)
    store, _ = base.fresh(tmp_path)
    db = sqlite3.connect(tmp_path / "agents.db", isolation_level=None)
    messages = [s for s, k in sorted(base.kinds.items()) if k == "message"]
    if column == "handled_seq":
        earlier = max(s for s in messages if s < base.handled_seq)
        db.execute(
            "UPDATE snapshots SET handled_seq=? WHERE actor_id='victim' AND seq=?",
            (earlier, base.snapshot_seq),
        )
    else:
        later = max(s for s, k in base.kinds.items() if k == "step" and s < max(messages))
        db.execute(
            "UPDATE snapshots SET seq=? WHERE actor_id='victim' AND seq=?",
            (later, base.snapshot_seq),
        )
    db.close()
    FIGURES["corruptions tried"] += 1
    got = anyio.run(recover, store, backend="asyncio")
    judge(base.reference, got, set())
