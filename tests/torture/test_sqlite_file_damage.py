"""SQLite file damage below the rows: bits flipped in the file itself, not through SQL.

``test_corruption`` damages column values with UPDATEs; this module flips bits in the pages
of a real store file: the serial types of record headers (a BLOB read as TEXT, an INTEGER as
a REAL), index pages, free pages and anywhere else. Then it opens the damaged copy the way an
operator and a runtime would: ``verify`` and the actor list (read-only, through the CLI
entry point), then recovery of both actors.

Every outcome must be one of (DESIGN.md section 10, "Damage is named"):

* the undamaged state (the damage lay where nothing needs to read, or did not matter);
* a ``CorruptEntryError`` naming the actor (quarantine cause, or raised by ``spawn``);
* ``StoreCorruptError`` naming the file (SQLite's own "database disk image is malformed").

Never an internal error, never a wrong state. Seeded (``ACTORLOG_TORTURE_SEED``); a small
number of cases in CI, ten times more with ``ACTORLOG_SOAK=1``.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import random
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from actorlog import (
    ActorlogError,
    ActorQuarantinedError,
    ActorSystem,
    CorruptEntryError,
    StoreCorruptError,
    ops,
)
from actorlog.cli._main import main as cli_main
from actorlog.stores import SqliteStore

from tests._sqlitefile import SqliteFile, flip

from .conftest import BASE_SEED, FIGURES, soak
from .helpers import Add, Counter, Get

ACTORS = ("bystander", "victim")
TARGETS = ("record header", "index page", "free page", "anywhere")


async def _build(path: Path) -> None:
    """Both actors get 12 messages (snapshots every 3 steps, the older ones deleted: free
    pages), padded so that the log spans several pages."""
    async with ActorSystem(SqliteStore(path), actors=[Counter]) as system:
        for aid in ACTORS:
            ref = await system.spawn(Counter, aid, snapshot_every=3, snapshot_keep=2)
            for n in range(1, 13):
                await ref.ask(Add(n, note="x" * (40 * n)), message_id=f"{aid}-{n}")
    # Pages freed the way deleted snapshots of a large state free them (this small state
    # fits in cells of shared pages): a scratch table, filled and dropped.
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE scratch (b BLOB)")
    db.execute("INSERT INTO scratch VALUES (zeroblob(40000))")
    db.execute("DROP TABLE scratch")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


async def _recover(path: Path) -> dict[str, Any]:
    """Per actor: its state, or the error that named its damage. A StoreCorruptError for
    the whole store propagates."""
    out: dict[str, Any] = {}
    with anyio.fail_after(120):
        async with ActorSystem(SqliteStore(path), actors=[Counter]) as system:
            for aid in ACTORS:
                try:
                    ref = await system.spawn(Counter, aid)
                    out[aid] = await ref.ask(Get(), timeout=60)
                except ActorQuarantinedError as exc:
                    out[aid] = exc.__cause__
                except (CorruptEntryError, StoreCorruptError) as exc:
                    out[aid] = exc
    return out


@attrs.frozen
class Flip:
    target: str
    offset: int
    bit: int
    what: str


def _flips(base: SqliteFile, rng: random.Random, n: int) -> list[Flip]:
    indexes = [name for name, kind in base.kinds.items() if kind == "index"]
    free = base.free_pages()
    tables = ("entries", "actors", "snapshots", "tags")  # tags: format 3's tag codes
    records = [r for t in tables if t in base.roots for r in base.records(t)]
    out: list[Flip] = []
    for i in range(n):
        target = TARGETS[i % len(TARGETS)]
        if target == "free page" and not free:
            target = "anywhere"
        if target == "record header":
            r = rng.choice(records)
            col = rng.randrange(len(r.types))
            # mostly the length-preserving flip (BLOB<->TEXT, INT64<->REAL), sometimes any bit
            bit = 0 if rng.random() < 0.7 else rng.randrange(8)
            what = f"{r.table} rowid {r.rowid} column {col} serial type {r.types[col]}"
            out.append(Flip(target, r.type_offsets[col], bit, what))
        elif target == "index page":
            name = rng.choice(indexes)
            page = rng.choice(base.pages_of(name))
            offset = (page - 1) * base.page_size + rng.randrange(base.page_size)
            out.append(Flip(target, offset, rng.randrange(8), f"index {name} page {page}"))
        elif target == "free page":
            page = rng.choice(free)
            offset = (page - 1) * base.page_size + rng.randrange(base.page_size)
            out.append(Flip(target, offset, rng.randrange(8), f"free page {page}"))
        else:
            offset = rng.randrange(len(base.data))
            out.append(Flip(target, offset, rng.randrange(8), f"byte {offset}"))
    return out


def _cli(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli_main(list(args))
    return code, err.getvalue()


@pytest.mark.parametrize(("backend", "cases"), [("asyncio", 24), ("trio", 12)])
def test_bit_flips_in_the_file_are_named_or_harmless(
    tmp_path: Path, backend: str, cases: int
) -> None:
    """On asyncio, and on trio (fewer cases: the same store code on the other backend)."""
    base_path = tmp_path / "base.db"
    anyio.run(_build, base_path, backend=backend)
    base = SqliteFile.read(base_path)
    (tmp_path / "ref").mkdir()
    shutil.copyfile(base_path, tmp_path / "ref" / "agents.db")
    reference = anyio.run(_recover, tmp_path / "ref" / "agents.db", backend=backend)
    assert all(isinstance(v, dict) for v in reference.values()), reference
    assert base.free_pages(), "the build left no free page to damage"

    seed = BASE_SEED * 7919 + 11
    rng = random.Random(seed)
    outcomes: collections.Counter[str] = collections.Counter()
    for i, f in enumerate(_flips(base, rng, soak(cases))):
        case = tmp_path / f"case{i}"
        case.mkdir()
        path = case / "agents.db"
        shutil.copyfile(base_path, path)
        flip(path, f.offset, f.bit)
        where = f"seed {BASE_SEED}, case {i}: {f.target}, {f.what}, offset {f.offset} bit {f.bit}"
        FIGURES["file bit flips tried"] += 1

        # operators first (read-only): verify and the list never die of an internal error
        for command in ("verify", "actors"):
            _, err = _cli(command, f"sqlite:///{path}")
            assert "internal error" not in err, f"{where}: actorlog {command}: {err}"

        async def read_only_verify(path: Path = path) -> None:
            with contextlib.suppress(StoreCorruptError):
                async with ops.opened(f"sqlite:///{path}") as store:
                    await ops.verify(store)

        try:
            anyio.run(read_only_verify, backend=backend)
        except ActorlogError as exc:  # named, but not one of the kinds allowed here
            pytest.fail(f"{where}: verify raised {exc!r}")

        try:
            got = anyio.run(_recover, path, backend=backend)
        except StoreCorruptError as exc:
            assert str(path) in str(exc), f"{where}: {exc}"
            outcomes["store corrupt"] += 1
            continue
        for aid in ACTORS:
            value = got[aid]
            if isinstance(value, CorruptEntryError):
                assert value.actor_id == aid, f"{where}: {aid} got {value!r}"
                outcomes[f"named ({value.check})"] += 1
            elif isinstance(value, StoreCorruptError):  # this actor's pages are unreadable
                assert str(path) in str(value), f"{where}: {value}"
                outcomes["store corrupt (one actor)"] += 1
            else:
                assert value == reference[aid], f"{where}: {aid} recovered a wrong state"
                outcomes["correct"] += 1
    for k, v in outcomes.items():
        FIGURES[f"file flips: {k}"] += v


# -- damage that only SQLite's own check sees, or that only some reads meet (issue 24 item 17)


async def _build_pair(path: Path) -> None:
    """``victim`` first, then ``bystander``: 12 asks each (message ids ``<actor>-<n>``),
    so that whole leaf pages of the entries table hold only the victim's rows."""
    async with ActorSystem(SqliteStore(path), actors=[Counter]) as system:
        for aid in ("victim", "bystander"):
            ref = await system.spawn(Counter, aid, snapshot_every=100)
            for n in range(1, 13):
                await ref.ask(Add(n, note="x" * 200), message_id=f"{aid}-{n}")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _cli_out(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = cli_main(list(args))
    return code, out.getvalue(), err.getvalue()


def _flip_index_key(path: Path) -> None:
    """Turn the message-id index's (format 3: ``log_message_id``) key ``victim-12`` into
    ``victim-13``: the rows all read
    back intact, but the index now finds ``victim-13`` at the row of ``victim-12``."""
    f = SqliteFile.read(path)
    [offset] = f.find("log_message_id", b"victim-12")
    flip(path, offset + len("victim-1"), 0)  # "2" (0x32) -> "3" (0x33)


def test_verify_reports_index_damage_only_sqlites_integrity_check_sees(tmp_path: Path) -> None:
    """Every row reads back intact, so the log's own checks pass; SQLite's integrity check
    finds the index disagreeing with its table, and verify reports it (exit 1)."""
    path = tmp_path / "agents.db"
    anyio.run(_build_pair, path, backend="asyncio")
    _flip_index_key(path)

    code, out, err = _cli_out("verify", f"sqlite:///{path}", "--json")
    assert code == 1, (out, err)
    report = json.loads(out)
    assert report["actors"] == 2 and not report["ok"]
    store_findings = [f for f in report["findings"] if f["where"] == "store"]
    assert store_findings, report["findings"]
    assert all(f["check"] == "integrity" and f["actor_id"] == "" for f in store_findings)
    assert any("log_message_id" in f["detail"] for f in store_findings), store_findings

    code, out, err = _cli_out("verify", f"sqlite:///{path}")
    assert code == 1, (out, err)
    assert "DAMAGE" in out and "the store's file: integrity check failed" in out, out
    assert "log_message_id" in out


def test_a_message_id_the_damaged_index_finds_at_another_message_is_store_corrupt(
    tmp_path: Path,
) -> None:
    """A fresh id whose key the damaged index holds must not get another message's reply:
    ``StoreCorruptError`` naming the file, and nothing is written."""
    path = tmp_path / "agents.db"
    anyio.run(_build_pair, path, backend="asyncio")
    _flip_index_key(path)

    async def main() -> None:
        async with ActorSystem(SqliteStore(path), actors=[Counter]) as system:
            ref = await system.spawn(Counter, "victim")
            before = await ref.ask(Get())
            with pytest.raises(StoreCorruptError) as info:
                await ref.ask(Add(99), message_id="victim-13")
            assert str(path) in str(info.value)
            assert "victim-13" in str(info.value) and "victim-12" in str(info.value)
            assert await ref.ask(Get()) == before  # nothing handled, nothing written
            assert 99 not in before["seen"]

    anyio.run(main, backend="asyncio")


def _victim_only_leaf(path: Path) -> int:
    """A leaf page of the entries table holding the victim's rows only."""
    f = SqliteFile.read(path)
    leaves: dict[int, set[object]] = collections.defaultdict(set)
    for r in f.records("entries"):
        leaves[r.type_offsets[0] // f.page_size + 1].add(r.key[0])
    return next(n for n, actors in sorted(leaves.items()) if actors == {"victim"})


def test_verify_names_an_actors_unreadable_page_and_checks_the_others(tmp_path: Path) -> None:
    """A leaf page of the victim's entries that SQLite cannot read: verify reports it as the
    victim's damage (exit 1, not "could not read") and still checks the bystander; recovery,
    history and the listing name it ``StoreCorruptError`` with the file; the bystander
    recovers its exact state."""
    path = tmp_path / "agents.db"
    anyio.run(_build_pair, path, backend="asyncio")
    (tmp_path / "ref").mkdir()
    shutil.copyfile(path, tmp_path / "ref" / "agents.db")
    leaf = _victim_only_leaf(path)
    f = SqliteFile.read(path)
    header, _ = f.page(leaf)
    flip(path, header, 0)  # the page type 0x0A (index leaf: entries are WITHOUT ROWID) -> 0x0B,
    # 0x0D (table leaf, a format-1 file) -> 0x0C: no such page type

    code, out, err = _cli_out("verify", f"sqlite:///{path}", "--json")
    assert code == 1, (out, err)
    report = json.loads(out)
    assert report["actors"] == 2
    victim = [f for f in report["findings"] if f["actor_id"] == "victim"]
    assert victim and victim[0]["check"] == "integrity", report["findings"]
    assert "malformed" in victim[0]["detail"]
    assert not [f for f in report["findings"] if f["actor_id"] == "bystander"]
    assert any(f["where"] == "store" for f in report["findings"])

    code, out, err = _cli_out("history", f"sqlite:///{path}", "victim")
    assert code == 2 and str(path) in err and "damaged below the log" in err, (out, err)
    code, out, err = _cli_out("actors", f"sqlite:///{path}")
    assert "internal error" not in err and "Unavailable" not in err, (out, err)

    async def history() -> None:
        async with ops.opened(f"sqlite:///{path}") as store:
            with pytest.raises(StoreCorruptError) as info:
                await ops.history(store, "victim")
            assert str(path) in str(info.value)

    anyio.run(history, backend="asyncio")

    reference = anyio.run(_recover_pair, tmp_path / "ref" / "agents.db", backend="asyncio")
    got = anyio.run(_recover_pair, path, backend="asyncio")
    assert isinstance(got["victim"], StoreCorruptError), got["victim"]
    assert str(path) in str(got["victim"])
    assert got["bystander"] == reference["bystander"]


async def _recover_pair(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with anyio.fail_after(60):
        async with ActorSystem(SqliteStore(path), actors=[Counter]) as system:
            for aid in ("victim", "bystander"):
                try:
                    ref = await system.spawn(Counter, aid)
                    out[aid] = await ref.ask(Get(), timeout=30)
                except ActorQuarantinedError as exc:
                    out[aid] = exc.__cause__
                except ActorlogError as exc:
                    out[aid] = exc
    return out
