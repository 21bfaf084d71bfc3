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
from actorlog._cli import main as cli_main
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
    records = [r for t in ("entries", "actors", "snapshots") for r in base.records(t)]
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
