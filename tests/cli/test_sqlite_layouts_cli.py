"""What README.md, docs/operators.md, docs/upgrading.md and docs/FORMAT.md promise of a SQLite
file, checked from outside on a format-5 file beside a format-4 one: a runtime's repeated
``ask`` (the step found without a step index, after many other messages and after
compaction), a message id reused with another message refused, the operator commands as
real processes (``verify``, ``history``, ``show``, ``export --raw``, ``compact``, ``fork``,
``actors``) and SQL typed by hand through the view ``entries`` agreeing with each other and
with FORMAT.md's checksum, hostile arguments refused with nothing stored changed, and a
format-4 file keeping format 4 after the new code wrote to it."""

from __future__ import annotations

import base64
import hashlib
import math
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from actorlog import ActorSystem, ops
from actorlog.errors import ActorNotFoundError, ConfigurationError, MessageIdReusedError
from actorlog.store import EntryRow
from actorlog.stores import SqliteStore
from actorlog.testing import entry_checksum

from tests._sqlitefile import new_files_in

from ._layouts import RAN, Ask, Researcher, copy, made, write
from ._support import cli

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[4, 5], ids=["format4", "format5"])
def layout(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """New files made in format ``layout`` (the runtime here writes them; the commands,
    real processes, open an existing file, which keeps its layout)."""
    value: int = request.param
    new_files_in(monkeypatch, value)
    RAN.clear()
    return value


def _sql(path: Path, query: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(query, params).fetchall()
    finally:
        db.close()


def _files(path: Path) -> tuple[str, str]:
    """The SHA-256 of the database's bytes and of its WAL's (none: empty; a reader may make
    an empty WAL and its index, which hold nothing)."""
    wal = path.with_name(path.name + "-wal")
    return (
        hashlib.sha256(path.read_bytes()).hexdigest(),
        hashlib.sha256(wal.read_bytes() if wal.exists() else b"").hexdigest(),
    )


def _assert_layout(path: Path, layout: int) -> None:
    """The file's format as FORMAT.md section 6 describes it: format 4's ``log`` is ``WITHOUT
    ROWID`` with a step index; format 5's a rowid table keyed ``id``, no step index."""
    assert _sql(path, "SELECT value FROM actorlog_meta WHERE key = 'format_version'") == [
        (str(layout),)
    ]
    ((log_sql,),) = _sql(path, "SELECT sql FROM sqlite_master WHERE name = 'log'")
    names = {n for (n,) in _sql(path, "SELECT name FROM sqlite_master")}
    if layout == 4:
        assert "WITHOUT ROWID" in log_sql and "log_step" in names
    else:
        assert "WITHOUT ROWID" not in log_sql and "log_step" not in names
        assert "id         INTEGER PRIMARY KEY" in log_sql


async def test_a_runtimes_file_reads_alike_through_every_command(
    tmp_path: Path, layout: int
) -> None:
    path = tmp_path / "agents.db"
    await write(path)
    _assert_layout(path, layout)
    start = _sql(path, "SELECT first_seq, last_seq FROM actors WHERE actor_id = 'r1'")
    ((first, last),) = start
    assert first > 1  # the runtime compacted r1 (its retention) after its snapshots
    before = _files(path)

    # verify: every checksum, chain and snapshot; r1 reported as compacted
    run = cli("verify", path, "--json")
    assert run.code == 0, run.err
    (report,) = run.json_lines()
    assert report["ok"] and report["actors"] == 11 and report["compacted"] == {"r1": first}

    # export --raw: each entry's bytes give its checksum by FORMAT.md [F6], and are the bytes
    # SQL typed by hand reads through the view ``entries`` (unpacked from the stored form)
    run = cli("export", path, "r1", "--raw")
    assert run.code == 0, run.err
    exported = [o for o in run.json_lines() if o["type"] == "entry"]
    assert [o["seq"] for o in exported] == list(range(first, last + 1))
    by_hand = {
        r[1]: EntryRow(*r)
        for r in _sql(path, "SELECT * FROM entries WHERE actor_id = 'r1' ORDER BY seq")
    }
    for o in exported:
        row = EntryRow(
            "r1",
            o["seq"],
            o["kind"],
            o["type_tag"],
            o["ref"],
            o["message_id"],
            base64.b64decode(o["payload_b64"]),
            o["checksum"],
        )
        assert o["valid"] and entry_checksum(row) == row.checksum, o
        assert by_hand[row.seq] == row
    assert len(by_hand) == len(exported)
    # every row of the file, through the view, carries the checksum of its payload
    for r in _sql(path, "SELECT * FROM entries"):
        assert entry_checksum(EntryRow(*r)) == r[7], r[:6]

    # history: every kept step with its reply, the compaction said under the header
    run = cli("history", path, "r1", "--json")
    assert run.code == 0, run.err
    steps = {o["message_id"]: o for o in run.json_lines() if o["type"] == "step"}
    assert steps["m-29"]["reply"] == "answer to q29" and steps["m-29"]["status"] == "ok"
    run = cli("history", path, "r1")
    assert run.code == 0 and f"log compacted: kept from seq {first}" in run.out, run.out
    # show: the last step (stored packed against its result) in full, its checksum checked
    run = cli("show", path, "r1", last)
    assert run.code == 0, run.err
    assert '"reply": "answer to q29"' in run.out and "ok" in run.out
    # actors: everyone idle
    run = cli("actors", path)
    assert run.code == 0 and run.out.count(" idle ") == 11, run.out

    # the file is as it was: the reading commands wrote nothing, and it keeps its format
    assert _files(path) == before
    _assert_layout(path, layout)
    assert _sql(path, "SELECT first_seq, last_seq FROM actors WHERE actor_id = 'r1'") == start


async def test_offline_compaction_then_a_repeated_ask(tmp_path: Path, layout: int) -> None:
    """``actorlog compact`` on the stopped file, then a new runtime: an ask repeated with a
    kept message id gets its recorded reply without running the tool (the step read from the
    log after its message), an id whose message was compacted away is a new message
    (docs/recovery.md, "The message-id deduplication window is the kept log"), and the
    file is clean and keeps its format."""
    path = tmp_path / "agents.db"
    await write(path)
    run = cli("compact", path, "--actor", "r1", "--retention", "since-snapshot", "--json")
    assert run.code == 0, run.err
    (done,) = run.json_lines()
    ((first,),) = _sql(path, "SELECT first_seq FROM actors WHERE actor_id = 'r1'")
    assert done["first_seq"] == first
    kept = {m for (m,) in _sql(path, "SELECT message_id FROM entries WHERE actor_id = 'r1'") if m}
    assert "m-29" in kept and "m-0" not in kept
    RAN.clear()
    async with ActorSystem(SqliteStore(path), actors=[Researcher]) as system:
        r1 = system.ref(Researcher, "r1")
        for mid in sorted(kept):
            n = int(mid.removeprefix("m-"))
            assert await r1.ask(Ask(f"q{n}"), message_id=mid) == f"answer to q{n}"
        assert RAN == []
        assert await r1.ask(Ask("q0"), message_id="m-0") == "answer to q0"
        assert RAN == ["q0"]
        with pytest.raises(MessageIdReusedError):
            await r1.ask(Ask("other"), message_id="m-29")
    run = cli("verify", path)
    assert run.code == 0, run.out + run.err
    _assert_layout(path, layout)


async def test_fork_delete_and_the_id_again(tmp_path: Path, layout: int) -> None:
    """``fork`` copies a kept log under a new id (a new actor key in the file), ``terminate``
    and ``delete`` remove an actor, and the id registered again by a runtime is a new actor
    from seq 1: its old message ids are new messages; ``verify`` is clean and the deletion
    is listed."""
    path = tmp_path / "agents.db"
    await write(path)
    run = cli("fork", path, "x00", "4", "x00-copy", "--yes")
    assert run.code == 0, run.err
    for args in (("terminate", path, "x03"), ("delete", path, "x03", "--yes")):
        run = cli(*args)
        assert run.code == 0, run.err
    RAN.clear()
    async with ActorSystem(SqliteStore(path), actors=[Researcher]) as system:
        copy = await system.spawn(Researcher, "x00-copy")
        assert await copy.ask(Ask("hi"), message_id="m-0") == "answer to hi"  # copied
        assert await copy.ask(Ask("hello"), message_id="m-1") == "answer to hello"
        reborn = await system.spawn(Researcher, "x03")
        assert await reborn.ask(Ask("hi"), message_id="m-0") == "answer to hi"
        assert RAN == ["hello", "hi"]  # x00-copy's second message, x03's first
    assert _sql(path, "SELECT seq, message_id FROM entries WHERE actor_id = 'x03'") == [
        (1, "m-0"),
        (2, None),
        (3, None),
        (4, None),
    ]
    run = cli("verify", path)
    assert run.code == 0, run.out + run.err
    run = cli("actors", path, "--deleted")
    assert run.code == 0 and "x03" in run.out
    _assert_layout(path, layout)


@pytest.mark.parametrize(
    "args",
    [
        ("show", "{db}", "r1", str(2**32 + 1)),
        ("show", "{db}", "r1", str(2**70)),
        ("show", "{db}", "r1", "-1"),
        ("show", "{db}", "r1", "0x10"),
        ("show", "{db}", "nobody", "1"),
        ("history", "{db}", "r1", "--since", "-5"),
        ("history", "{db}", "r1", "--since", "nan"),
        ("history", "{db}", "r1", "--since", str(2**70)),
        ("history", "{db}", "r1", "--since", str(2**63)),
        ("history", "{db}", "nobody"),
        ("export", "{db}", "nobody"),
        ("verify", "{db}", "nobody"),
        ("resolve", "{db}", "r1", str(2**70), "--retry"),
        ("resolve", "{db}", "r1", str(2**32 + 2), "--retry"),
        ("resolve", "{db}", "r1", "2", "--result", "NaN"),
        ("fork", "{db}", "r1", str(2**32), "r1-copy", "--yes"),
        ("fork", "{db}", "x00", "4", "x00", "--yes"),
        ("fork", "{db}", "x00", "4", "x03", "--yes"),
        ("fork", "{db}", "r1", "100", "r1-copy", "--yes"),  # compacted: refused
        ("compact", "{db}", "--actor", "nobody"),
        ("compact", "{db}", "--retention", "some"),
        ("delete", "{db}", "nobody", "--yes"),
        ("restart", "{db}", "r1"),
    ],
    ids=lambda a: " ".join(a[:1] + a[2:]),
)
async def test_hostile_arguments_exit_2_and_change_nothing(
    tmp_path: Path, layout: int, args: tuple[str, ...], origin: dict[int, Path]
) -> None:
    """docs/operators.md, "Exit codes": bad arguments, an actor or entry not found, an intent
    not in doubt: exit 2, the error on stderr (nothing on stdout: a seq beyond a store's
    64-bit integers is a bad argument, refused before the command reads anything), and not
    a byte of the file changed."""
    path = copy(origin[layout], tmp_path)
    before = _files(path)
    run = cli(*(a.format(db=path) for a in args))
    assert run.code == 2, (run.code, run.out, run.err)
    assert run.err.strip() and "Traceback" not in run.err, run.err
    assert run.out == ""  # refused before anything is printed
    assert _files(path) == before
    _assert_layout(path, layout)


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """A file of each format written by :func:`write`, once for the module."""
    return made(tmp_path_factory)


async def test_hostile_arguments_to_ops_are_typed_errors(
    tmp_path: Path, layout: int, origin: dict[int, Path]
) -> None:
    """docs/operators.md, "The Python API": ``actorlog.ops`` over a store opened for writing
    answers each bad argument with an actorlog error at the call (``ConfigurationError``,
    ``ActorNotFoundError``), and the file is not changed."""
    path = copy(origin[layout], tmp_path)
    url = f"sqlite:///{path}"
    async with ops.opened(url, read_only=False) as store:
        pass  # a writable open may complete the schema (CREATE ... IF NOT EXISTS) first
    before = _files(path)
    big, over = 2**70, 2**32 + 1
    async with ops.opened(url, read_only=False) as store:
        calls: list[tuple[type[Exception], Callable[[], Awaitable[object]]]] = [
            (ConfigurationError, lambda: ops.show(store, "r1", big)),
            (ActorNotFoundError, lambda: ops.show(store, "r1", over)),
            (ConfigurationError, lambda: ops.show(store, "r1", "3")),  # type: ignore[arg-type]
            (ConfigurationError, lambda: ops.history(store, "r1", since=big)),
            (ConfigurationError, lambda: ops.history(store, "r1", since=math.nan)),  # type: ignore[arg-type]
            (ConfigurationError, lambda: ops.resolve(store, "r1", big, retry=True)),
            (ConfigurationError, lambda: ops.resolve(store, "r1", over, retry=True)),
            (ConfigurationError, lambda: ops.resolve(store, "r1", 4, retry=True)),
            (ConfigurationError, lambda: ops.resolve(store, "r1", 2, result=math.nan)),
            (ConfigurationError, lambda: ops.fork(store, "r1", at=big, new_id="n", yes=True)),
            (ConfigurationError, lambda: ops.fork(store, "r1", at=4, new_id="r1", yes=True)),
            (ConfigurationError, lambda: ops.fork(store, "r1", at=4, new_id="", yes=True)),
            (ConfigurationError, lambda: ops.compact(store, "r1", retention="some")),
            (ConfigurationError, lambda: ops.compact(store, "r1", retention=math.nan)),
            (ActorNotFoundError, lambda: ops.compact(store, "nobody")),
            (ConfigurationError, lambda: ops.restart(store, "r1")),
            (ConfigurationError, lambda: ops.delete(store, "r1", yes=True, by=5)),  # type: ignore[arg-type]
            (ConfigurationError, lambda: ops.list_actors_page(store, limit=big)),
        ]
        for error, call in calls:
            with pytest.raises(error):
                await call()
    assert _files(path) == before
    _assert_layout(path, layout)
