"""Operator tools: holes found from outside (issues 11 and 18), each with its regression test.

Real parts only: MemoryStore and SqliteStore files in tmp_path, the real ``ActorSystem``, the
real console script in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from actorlog import Actor, ActorSystem, ConfigurationError, Context, ops, tool
from actorlog._journal import codec as _codec, records as _records
from actorlog.store import Store
from actorlog.stores import MemoryStore, SqliteStore

from .._keys import Key, incarnation_of
from ._agents import Auditor, Biller, Job, Log, crash_mid_call, ran
from ._support import cli

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()


async def _decisions(store: Store, actor_id: str, intent_seq: int) -> list[str]:
    return [r.type_tag for r in await store.find_ref(actor_id, "decision", intent_seq)]


async def _in_doubt_store() -> tuple[MemoryStore, int]:
    store = MemoryStore()
    await crash_mid_call(store)
    await store.open()
    (a,) = await ops.list_actors(store)
    (doubt,) = a.in_doubt
    return store, doubt.intent_seq


# -- 11.1: one decision per intent -------------------------------------------------------


@pytest.mark.parametrize("second", ["fail", "retry", "result"])
async def test_online_second_resolve_is_refused_and_writes_nothing(second: str) -> None:
    store, seq = await _in_doubt_store()
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            await system.wait_in_doubt("bill-1")
        await system.resolve("bill-1", seq, result="by hand", by="carol", reason="seen")
        choices: dict[str, dict[str, Any]] = {
            "fail": {"fail": "no"},
            "retry": {"retry": True},
            "result": {"result": "other"},
        }
        kwargs = choices[second]
        with pytest.raises(ConfigurationError) as info:
            await system.resolve("bill-1", seq, by="dave", **kwargs)
        text = str(info.value)
        assert "already" in text and "result" in text and "carol" in text
        ref = await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            assert await ref.ask(Job("hang"), message_id="m2") == "by hand"
    await store.open()
    assert await _decisions(store, "bill-1", seq) == ["result"]
    assert ran == ["first", "hang"]


async def test_online_concurrent_resolves_log_one_decision() -> None:
    store, seq = await _in_doubt_store()
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            await system.wait_in_doubt("bill-1")
        outcomes: list[str] = []

        async def one(**kwargs: Any) -> None:
            try:
                await system.resolve("bill-1", seq, **kwargs)
                outcomes.append("ok")
            except ConfigurationError:
                outcomes.append("refused")

        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: one(result="a"))
            tg.start_soon(lambda: one(fail="b"))
        assert sorted(outcomes) == ["ok", "refused"]
    await store.open()
    assert len(await _decisions(store, "bill-1", seq)) == 1


async def test_online_resolve_after_the_step_went_on_names_the_decision() -> None:
    store, seq = await _in_doubt_store()
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            await system.wait_in_doubt("bill-1")
        await system.resolve("bill-1", seq, result="by hand", by="carol")
        with anyio.fail_after(5):
            assert await ref.ask(Job("hang"), message_id="m2") == "by hand"
        with pytest.raises(ConfigurationError, match=r"already .*result.*carol"):
            await system.resolve("bill-1", seq, retry=True)
    await store.open()
    assert await _decisions(store, "bill-1", seq) == ["result"]


async def test_offline_second_resolve_names_the_decision_already_taken() -> None:
    store, seq = await _in_doubt_store()
    await ops.resolve(store, "bill-1", seq, result="x", by="carol", reason="seen")
    last = (await store.get_actor("bill-1")).last_seq  # type: ignore[union-attr]  # exists
    choices: list[dict[str, Any]] = [{"retry": True}, {"fail": "no"}, {"result": "y"}]
    for kwargs in choices:
        with pytest.raises(ConfigurationError, match=r"already .*result.*carol"):
            await ops.resolve(store, "bill-1", seq, **kwargs)
    assert (await store.get_actor("bill-1")).last_seq == last  # type: ignore[union-attr]  # exists


async def test_resolve_of_a_seq_that_is_not_an_intent_says_what_it_is() -> None:
    store, _ = await _in_doubt_store()
    with pytest.raises(ConfigurationError, match=r"seq 1 .*is a message, not an intent"):
        await ops.resolve(store, "bill-1", 1, result="x")
    with pytest.raises(ConfigurationError, match=r"no entry at seq 999"):
        await ops.resolve(store, "bill-1", 999, result="x")
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            await system.wait_in_doubt("bill-1")
        with pytest.raises(ConfigurationError, match=r"seq 1 .*is a message, not an intent"):
            await system.resolve("bill-1", 1, result="x")
        with pytest.raises(ConfigurationError, match=r"seq 2 .*has a result"):
            await system.resolve("bill-1", 2, result="x")  # the first call's intent: it ran


@pytest.mark.parametrize("second", ["retry", "fail"])
async def test_replay_serves_the_first_decision_of_a_log_that_holds_two(second: str) -> None:
    """A store written before the one-decision rule may hold two decisions for one intent:
    replay must serve the one the live step used (the first), and never run the tool again."""
    store, seq = await _in_doubt_store()
    await ops.resolve(store, "bill-1", seq, result="by hand", by="carol")
    last = (await store.get_actor("bill-1")).last_seq  # type: ignore[union-attr]  # exists
    payload = _records.decision_payload(
        action=second,
        error={"type": "OperatorFailed", "message": "no"} if second == "fail" else None,
        by="old",
        reason="",
    )
    row = _codec.make_row(
        "bill-1",
        last + 1,
        "decision",
        second,
        seq,
        None,
        _codec.encode_plain(payload, "decision"),
    )
    await store.append("bill-1", last, [row])
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            assert await ref.ask(Job("hang"), message_id="m2") == "by hand"
    assert ran == ["first", "hang"]
    await store.open()
    h = await ops.history(store, "bill-1")
    call = h.steps[1].calls[0]
    assert (call.status, call.value) == ("resolved", "by hand")
    assert [(d.action, d.ignored) for d in call.decisions] == [("result", False), (second, True)]


# -- 18.18: terminal escape injection -------------------------------------------------------

#: ESC (OSC title, clear screen), BEL, C1 CSI, a bidi override, DEL: none may reach a terminal.
EVIL = "m<script>alert(1)</script>\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e\x7f"
_CONTROL = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)] if chr(c) != "\n"] + ["\u202e"]


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


def _raw_controls(text: str) -> list[str]:
    return sorted({repr(c) for c in text if c in _CONTROL})


async def _evil_store(path: Path) -> None:
    store = SqliteStore(path)
    await crash_mid_call(store)
    async with ActorSystem(SqliteStore(path), actors=[Biller, Auditor]) as system:
        await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            (seq,) = await system.wait_in_doubt("bill-1")
        await system.resolve("bill-1", seq, result=EVIL, by=EVIL, reason=EVIL)
        ref = await system.spawn(Biller, "bill-1")
        with anyio.fail_after(5):
            await ref.ask(Job(EVIL), message_id=EVIL)
    raw = sqlite3.connect(path)
    with raw:
        raw.execute(
            "INSERT INTO events (actor_id, at, kind, detail) VALUES ('bill-1', 1.0, ?, ?)",
            (EVIL, json.dumps({"error": EVIL, "error_type": EVIL, "by": EVIL})),
        )
        raw.execute(
            "INSERT INTO events (actor_id, at, kind, detail) VALUES ('bill-1', 2.0, 'stopped', ?)",
            (json.dumps({"error": EVIL, "error_type": EVIL}),),
        )
    raw.close()


async def test_no_log_value_reaches_the_terminal_raw(tmp_path: Path) -> None:
    db = tmp_path / "evil.db"
    await _evil_store(db)
    message_seq = 9
    for color in ("never", "always"):
        for args in (
            ("actors", db),
            ("history", db, "bill-1"),
            ("show", db, "bill-1", str(message_seq)),
            ("show", db, "bill-1", "7"),
            ("verify", db),
        ):
            r = cli("--color", color, *args)
            assert r.code == 0, (args, r.err)
            # with colors: our own only (ESC [ digits m), removed here
            out = re.sub(r"\x1b\[[0-9;]*m", "", r.out) if color == "always" else r.out
            assert _raw_controls(out) == [], (args, color)
            assert _raw_controls(r.err) == [], (args, color)
    r = cli("--color", "never", "show", db, "bill-1", str(message_seq))
    assert "\\x1b]0;pwned\\x07" in r.out or "\\u001b]0;pwned\\u0007" in r.out  # escaped
    assert "\\u000a" not in r.out and '\n      "name": ' in r.out  # pretty JSON, as before


async def test_json_output_escapes_c1_controls(tmp_path: Path) -> None:
    db = tmp_path / "evil.db"
    await _evil_store(db)
    for args in (
        ("actors", db, "--json"),
        ("history", db, "bill-1", "--json"),
        ("show", db, "bill-1", "9", "--json"),
        ("export", db, "bill-1"),
    ):
        r = cli(*args)
        assert r.code == 0, (args, r.err)
        assert _raw_controls(r.out) == [], args
        assert any(EVIL in s for x in r.json_lines() for s in _strings(x)), args  # exact


async def test_html_export_escapes_every_log_value(tmp_path: Path) -> None:
    db = tmp_path / "evil.db"
    await _evil_store(db)
    out = tmp_path / "h.html"
    r = cli("history", db, "bill-1", "--html", out)
    assert r.code == 0, r.err
    html = out.read_text()
    assert _raw_controls(html) == []
    assert "<script" not in html and "&lt;script&gt;alert(1)" in html


# -- 18.19: NaN / Infinity in float columns --------------------------------------------------


def _strict(line: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"invalid JSON constant {name}")

    return json.loads(line, parse_constant=refuse)


async def test_non_finite_floats_are_named_not_emitted(tmp_path: Path) -> None:
    db = tmp_path / "inf.db"
    store = SqliteStore(db)
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-1", snapshot_every=1)
        await ref.ask(Job("a"), message_id="m1")
    raw = sqlite3.connect(db)
    with raw:  # SQLite stores infinities as REAL (a NaN becomes NULL)
        raw.execute("UPDATE actors SET created_at = 9e999")
        raw.execute("UPDATE snapshots SET created_at = -9e999")
        raw.execute("UPDATE events SET at = 9e999")
    raw.close()
    for args in (
        ("actors", db, "--json"),
        ("history", db, "bill-1", "--json"),
        ("export", db, "bill-1"),
        ("verify", db, "--json"),
    ):
        r = cli(*args)
        assert r.code in (0, 1), (args, r.err)
        lines = [_strict(line) for line in r.out.splitlines() if line.strip()]
        assert lines, args
        if args[0] != "verify":
            assert "not a finite number" in r.out, args
    for text_args in (("actors", db), ("history", db, "bill-1"), ("verify", db)):
        r = cli(*text_args)
        assert r.code in (0, 1), (text_args, r.err)
        assert "internal error" not in r.err
    assert "DAMAGED time" in cli("history", db, "bill-1").out
    r = cli("verify", db)
    assert r.code == 1
    assert "bill-1 summary row: summary check failed: created_at is not a time: inf" in r.out
    assert "snapshot seq" in r.out and "created_at is not a time: -inf" in r.out


# -- 18.20: a STORE that is no SQLite file -----------------------------------------------------


@pytest.mark.parametrize("command", ["actors", "verify", "resolve", "fork"])
def test_a_directory_as_store_is_one_clean_error(tmp_path: Path, command: str) -> None:
    extra = {
        "actors": (),
        "verify": (),
        "resolve": ("a", "1", "--retry"),
        "fork": ("a", "--at", "1", "--as", "b"),
    }[command]
    targets: list[str | Path] = [tmp_path, tmp_path / "no" / "such" / "dir.db", "nosuch://x"]
    for target in targets:
        for _ in range(4):  # the aiosqlite thread's late traceback was intermittent
            r = cli(command, target, *extra)
            assert r.code == 2, (target, r.err)
            assert r.err.count("\n") == 1 and r.err.startswith("actorlog: error: "), r.err
    assert list(tmp_path.iterdir()) == []  # nothing created


# -- 11.7 / 18.17: verify on a live store ------------------------------------------------------


def _start_writer(db: Path) -> subprocess.Popen[str]:
    root = Path(__file__).parents[2]
    proc = subprocess.Popen(
        [sys.executable, str(root / "tests" / "cli" / "live_writer.py"), str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "READY":
        proc.kill()
        raise AssertionError(f"writer did not start: {line!r} {proc.communicate()[1]}")
    return proc


async def test_verify_reports_no_damage_while_a_runtime_writes(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    proc = _start_writer(db)
    try:
        async with ops.opened(f"sqlite:///{db}") as store:
            seen = set()
            for _ in range(40):
                report = await ops.verify(store)
                assert report.findings == [], report.findings
                statuses = await ops.list_actors(store)
                assert all(a.status != "quarantined" for a in statuses), statuses
                seen.add(report.entries)
            assert len(seen) > 1  # the store really was being written meanwhile
    finally:
        proc.kill()
        proc.communicate(timeout=10)


# -- 18.11: operator writes only into actorlog stores -------------------------------------------


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


async def _newer_format_store(db: Path) -> None:
    store = SqliteStore(db)
    await crash_mid_call(store)
    raw = sqlite3.connect(db)
    with raw:
        raw.execute("UPDATE actorlog_meta SET value = '99' WHERE key = 'format_version'")
    raw.execute("PRAGMA journal_mode=DELETE")
    raw.close()


def _other_app(db: Path) -> None:
    raw = sqlite3.connect(db)
    with raw:
        raw.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        raw.execute("INSERT INTO users (name) VALUES ('alice')")
    raw.close()


@pytest.mark.parametrize("kind", ["empty", "other_app", "newer_format"])
@pytest.mark.parametrize("command", ["resolve", "fork"])
async def test_operator_writes_change_nothing_in_a_file_that_is_no_usable_store(
    tmp_path: Path, kind: str, command: str
) -> None:
    d = tmp_path / "d"
    d.mkdir()
    db = d / "x.db"
    if kind == "empty":
        db.write_bytes(b"")
    elif kind == "other_app":
        _other_app(db)
    else:
        await _newer_format_store(db)
    before = _files(d)
    args = {
        "resolve": ("resolve", db, "bill-1", "6", "--retry"),
        "fork": ("fork", db, "bill-1", "--at", "1", "--as", "b", "--yes"),
    }[command]
    r = cli(*args)
    assert r.code == 2, r
    assert r.err.count("\n") == 1 and r.err.startswith("actorlog: error: "), r.err
    assert "not an actorlog store" in r.err or "newer" in r.err or "version" in r.err, r.err
    assert _files(d) == before  # not a byte changed, no -wal or -shm file made


# -- 18.9 / 18.12: forks replay their copied history ---------------------------------------------

keys_used: list[str] = []


@tool(effect="write", idempotent=True, name="ops_refund")
async def refund(name: str, *, idempotency_key: str) -> str:
    keys_used.append(idempotency_key)
    if name == "hang" and len(keys_used) == 1:  # the first run only
        await anyio.sleep_forever()
    return f"refunded {name}"


class Refunder(Actor[Log]):
    async def receive(self, ctx: Context, msg: Job) -> str:
        return str(await ctx.call(refund, msg.name))


@pytest.mark.parametrize("at_step_end", [False, True])
async def test_fork_of_an_actor_that_sent_replays_its_copied_sends(at_step_end: bool) -> None:
    store = MemoryStore()
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-3")
        await ref.ask(Job("a"), message_id="m1")
        await ref.ask(Job("notify"), message_id="m2")
    await store.open()
    h = await ops.history(store, "bill-3")
    notify = h.steps[1]
    (send,) = [e for e in notify.effects if e.name == "send"]
    assert notify.step_seq is not None
    at = notify.step_seq if at_step_end else send.seq
    await ops.fork(store, "bill-3", at=at, new_id="bill-3-fork", yes=True)
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        fork = await system.spawn(Biller, "bill-3-fork")
        with anyio.fail_after(5):
            assert await fork.ask(Job("b"), message_id="m3") == "charged b"
            auditor = await system.spawn(Auditor, "auditor")
            await auditor.ask(Job("ping"), message_id="p")
    await store.open()
    assert (await ops.actor_status(store, "bill-3-fork")).status == "idle"
    # the copied send was delivered once, by the original: the fork's replay re-used its id
    steps = (await ops.history(store, "auditor")).steps
    assert [s.body["name"] for s in steps] == ["audit", "ping"]


async def test_fork_history_shows_the_key_the_fork_ran_a_copied_call_with() -> None:
    keys_used.clear()
    store = MemoryStore()
    async with ActorSystem(store, actors=[Refunder], shutdown_grace=0) as system:
        ref = await system.spawn(Refunder, "r-1")
        await ref.send(Job("hang"), message_id="m1")
        with anyio.fail_after(5):
            while not keys_used:
                await anyio.sleep(0.01)
    await store.open()
    (a,) = await ops.list_actors(store)
    (doubt,) = a.in_doubt
    assert doubt.key == Key("r-1", 1, 0)
    await ops.fork(store, "r-1", at=doubt.intent_seq, new_id="r-2", yes=True)
    (fork_doubt,) = (await ops.actor_status(store, "r-2")).in_doubt
    # what the fork's runtime will run it with: the fork's id, and its own incarnation
    assert fork_doubt.key == Key("r-2", 1, 0)
    assert incarnation_of(fork_doubt.key) != incarnation_of(doubt.key)
    keys_used.clear()
    keys_used.append("x")  # "hang" hangs only the first run
    async with ActorSystem(store, actors=[Refunder]) as system:
        fork = await system.spawn(Refunder, "r-2")
        with anyio.fail_after(5):
            while (await ops.actor_status(store, "r-2")).status != "idle":
                await anyio.sleep(0.01)
        del fork
    # (the system also recovers r-1, which re-runs its own call with its own key)
    assert [k for k in keys_used if k.startswith("r-2")] == [fork_doubt.key]
    await store.open()
    call = (await ops.history(store, "r-2")).steps[0].calls[0]
    assert call.key == fork_doubt.key
    assert call.recorded_key == doubt.key


# -- 18.21: history --since reads what it shows, and only that --------------------------------


async def test_history_since_with_messages_logged_ahead_reports_no_false_damage() -> None:
    """Messages logged far ahead of their steps (a backlog): --since used to read every entry
    between the oldest step in progress and SEQ, and reported the steps of messages it had not
    read as 'reference' damage."""
    store = MemoryStore()
    async with ActorSystem(store, actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "b")

        async def send(i: int) -> None:
            await ref.send(Job(f"j{i}"), message_id=f"m{i}")

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(send, i)
        with anyio.fail_after(10):
            await ref.ask(Job("last"), message_id="last")
    await store.open()
    full = await ops.history(store, "b")
    assert full.damage == [] and len(full.steps) == 21
    tenth = sorted(s.step_seq or 0 for s in full.steps)[9]
    h = await ops.history(store, "b", since=tenth)
    assert h.damage == []
    assert all(s.status == "ok" for s in h.steps)
    shown = {s.message_seq for s in h.steps}
    expected = {s.message_seq for s in full.steps if (s.step_seq or 0) > tenth}
    assert shown == expected
    r_all = [x async for x in ops.iter_history(store, "b")]
    assert isinstance(r_all[0], ops.ActorStatus)
    assert [x.message_seq for x in r_all if isinstance(x, ops.Step)] == sorted(
        s.message_seq for s in full.steps
    )


async def test_verify_names_undecodable_text_read_through_a_consistent_read(
    tmp_path: Path,
) -> None:
    """reading() opens a connection of its own: it must decode TEXT columns like the store's
    own connections do, so damage there is a named finding, not 'store unreadable'."""
    db = tmp_path / "bad-text.db"
    async with ActorSystem(SqliteStore(db), actors=[Biller, Auditor]) as system:
        ref = await system.spawn(Biller, "bill-1")
        await ref.ask(Job("a"), message_id="m1")
    raw = sqlite3.connect(db)
    with raw:
        raw.execute("UPDATE entries SET message_id = CAST(X'6dff' AS TEXT) WHERE seq = 1")
    raw.close()
    r = cli("verify", db)
    assert r.code == 1, r
    assert "bill-1 seq 1:" in r.out, r.out


def test_a_directory_as_a_library_store_is_one_clean_error(tmp_path: Path) -> None:
    """The same for a library user: ActorSystem(SqliteStore(a directory))."""
    script = (
        "import anyio\n"
        "from actorlog import ActorSystem\n"
        "from actorlog.stores import SqliteStore\n"
        "async def main():\n"
        "    try:\n"
        f"        async with ActorSystem(SqliteStore({str(tmp_path)!r}), actors=[]):\n"
        "            pass\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, exc)\n"
        "anyio.run(main)\n"
    )
    for _ in range(5):  # the late traceback was intermittent
        p = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
        )
        assert p.returncode == 0 and p.stderr == "", p.stderr
        assert p.stdout.startswith("StoreUnavailableError") and "directory" in p.stdout
