"""The argument fuzz over the public Python surface (issue 24, "Make the suite find this
class"): every public constructor and callable, ``ActorSystem`` / ``ActorRef`` / ``Context``
methods, ``@tool`` / ``Retry`` options, spawn options, timers, and the operator API
(``actorlog.ops``), each parameter given each hostile value of ``_world.HOSTILE`` (inf, nan,
-0.0, huge ints, ``datetime.min/max``, naive and aware datetimes, ``timedelta.max/min``,
wrong types, an instance for a class and a class for an instance, empty, 100 kB, NUL and
surrogate strings, 2,000-level nesting, bool for int).

Each call must either succeed (for a value its parameter accepts) or raise an
``ActorlogError`` at the call; a value its parameter cannot take (``_world.ACCEPTS``) must be
refused. A refused call stores nothing (every row of the SQLite file compared before and
after). Afterwards the operator tools still work: listing, verify (clean), every history,
the timers, and a restarted system recovers every actor.

Cases that find a listed defect of issue 24 are in :data:`KNOWN_HOLES` (``case`` or
``case:param=value`` -> the item): they must still fail, so a merged fix shows up as a test
to update (strict, like ``xfail_strict``). ``ACTORLOG_FUZZ_ENABLE=all`` reports them as
ordinary failures.
"""

from __future__ import annotations

import inspect
import os
import tempfile
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import actorlog
import anyio
import attrs
import pytest
from actorlog import (
    Actor,
    ActorlogError,
    ActorSystem,
    Retry,
    idempotency_key,
    message,
    ops,
    stores as stores_pkg,
    tool,
)
from actorlog.stores import MemoryStore, SqliteStore, open_store

from . import _world
from ._world import CTX_OUTCOMES, CTX_PARAMS, HOSTILE, Book, Fuzzer, Note, Try, must_refuse

#: The defects the fuzz found by itself that issue 24 does not list (``NEW-n`` in
#: KNOWN_HOLES): each is a kind of mistake, seen at many parameters. All seven are fixed
#: (bounded ``_checks.shown`` in error messages, one validator per kind of value in
#: ``_checks``); kept to name the kind of a hole found later.
NEW_DEFECTS: dict[str, str] = {
    "NEW-1": "a 2,000-level nested value (list or dict) makes the error message itself fail: "
    "RecursionError from repr() (or json) of the value while building the ConfigurationError, "
    "instead of the typed error; bound what an error message shows (_codec.shown, used for "
    "actor ids and message ids now)",
    "NEW-2": "ids of the wrong type: ActorSystem.ownership, unschedule, ops.timers/deleted "
    "accept any value (an int, a datetime: empty results); cancel_timer accepts '' and NUL; "
    "idempotency_key accepts any type (fixed here: ActorSystem.status/error/in_doubt/"
    "last_recovery/wait_in_doubt took any value or failed with a bare TypeError; then the "
    "rest: ownership, resolve, unschedule, cancel_timer, ops.timers/deleted, idempotency_key)",
    "NEW-3": "NUL bytes accepted in stable names (tool, message, actor), schedule names, "
    "ctx.version/patched change ids, reasons and owner names: PostgreSQL text cannot hold "
    "NUL, so a value SQLite takes fails there (actor ids refuse it; message ids now too)",
    "NEW-4": "reason=/by= of terminate/delete/cancel (system and ops) and ops.compact(by=) are "
    "not checked: non-text values raise a bare TypeError from json ('not JSON serializable'), "
    "others (numbers, None, lists) are recorded as they are (fixed: _codec.validate_text)",
    "NEW-5": "a value that is not an Actor class for cls= (spawn, ctx.spawn): a bare "
    "AttributeError/TypeError instead of a ConfigurationError (fixed: _names.check_actor_class; "
    "ref= of send_later, schedule, ctx.send, ctx.send_later: fixed by the timers work)",
    "NEW-6": "seqs and counts (ops.history/iter_history since=, show seq=, fork/fork_effects "
    "at=, resolve intent_seq=, list_actors_page offset=/limit=/status_limit=) are not "
    "checked: a bare TypeError for text or a datetime; floats, nan, inf and bools accepted "
    "(fixed: _codec.validate_int)",
    "NEW-7": "options not checked: ActorSystem(actors=, messages=) a bare TypeError or "
    "AttributeError for a non-iterable or non-class; owner= any type; aliases= (actor, "
    "message) a bare TypeError; SqliteStore(busy_timeout=) OverflowError/TypeError/ValueError, "
    "path= a bare TypeError; ask(timeout=nan) ValueError, timeout=inf accepted; "
    "wait_in_doubt(poll=) ValueError/TypeError; ops.verify(progress=) not callable: "
    "TypeError late; ops.list_actors_page search=/descending=/sort= bare errors",
}

#: What the fuzz finds that is a known defect: ``case:param`` -> the item(s) of issue 24 it
#: waits for, or NEW-n (NEW_DEFECTS). Each must still be found (strict, like
#: ``xfail_strict``): when a fix is merged, its line goes (the case then checks the fix).
KNOWN_HOLES: dict[str, str] = {}

ENABLE_ALL = os.environ.get("ACTORLOG_FUZZ_ENABLE") == "all"

#: every hostile value for every parameter (``ACTORLOG_FUZZ_ALL=1``, or a soak run); by
#: default the core ones, which keeps the default run near two minutes on 2 cores
FULL = bool(os.environ.get("ACTORLOG_FUZZ_ALL") or os.environ.get("ACTORLOG_SOAK"))
CORE = ["nan", "inf", "huge", "-1", "true", "dt_max", "dt_min_utc", "td_max", "naive"]
CORE += ["empty", "big", "nul", "surrogate", "deep", "object", "class", "instance", "none"]


@dataclass
class Findings:
    """What one case found, keyed ``param=value``."""

    case: str
    found: dict[str, str] = field(default_factory=dict)

    def add(self, param: str, value: str, what: str) -> None:
        self.found.setdefault(f"{param}={value}", what)

    def check(self, holes: dict[str, str] | None = None) -> None:
        """Fail for what is not a known hole, and for a known hole no longer found."""
        known = {
            key: item
            for key, item in (KNOWN_HOLES if holes is None else holes).items()
            if key.split(":", 1)[0] == self.case and not ENABLE_ALL
        }
        unexplained = {}
        explained: set[str] = set()
        for k, what in self.found.items():
            param = k.split("=", 1)[0]
            hole = next(
                (h for h in (f"{self.case}:{k}", f"{self.case}:{param}", self.case) if h in known),
                None,
            )
            if hole is None:
                unexplained[k] = what
            else:
                explained.add(hole)
        lines = [f"  {self.case}({k}): {what}" for k, what in sorted(unexplained.items())]
        # a hole no longer found is a fix to acknowledge; judged on every value only (the
        # core values may miss what shows a hole)
        fixed = sorted(set(known) - explained) if FULL else []
        lines += [f"  {h}: no longer found ({known[h]} fixed?): delete it" for h in fixed]
        assert not lines, f"{len(lines)} finding(s):\n" + "\n".join(lines)


def outcome_of(exc: BaseException | None) -> str:
    if exc is None:
        return "accepted"
    if isinstance(exc, ActorlogError):
        return f"refused {type(exc).__name__}"
    return f"UNTYPED {type(exc).__name__}: {str(exc)[:200]}"


def judge(f: Findings, param: str, kind: str, value: str, outcome: str) -> None:
    """Record what is wrong with ``outcome`` for ``param`` (of ``kind``) = ``value``."""
    if outcome.startswith("UNTYPED"):
        f.add(param, value, outcome)
    elif outcome.startswith("accepted") and must_refuse(kind, value):
        f.add(param, value, f"{outcome} (a {kind} must refuse it)")


async def judge_result(f: Findings, durable: Any, system: Any, actor_id: str, reply: Any) -> None:
    """Hostile values for each argument of an integration's ``DurableAgent.result(system,
    actor_id, reply)`` (issue 25), the others good: what is not a system, an actor id or a
    run's reply must be a typed error at the call."""
    cases: dict[str, tuple[str, Any]] = {
        "system": ("nothing", lambda v: durable.result(v, actor_id, reply)),
        "actor_id": ("id", lambda v: durable.result(system, v, reply)),
        "reply": ("nothing", lambda v: durable.result(system, actor_id, v)),
    }
    for param, (kind, call) in cases.items():
        for value in values():
            try:
                await call(HOSTILE[value])
                exc: BaseException | None = None
            except Exception as e:
                exc = e
            judge(f, param, kind, value, outcome_of(exc))


def values() -> list[str]:
    return list(HOSTILE) if FULL else CORE


# -- constructors and decorators (nothing stored anywhere) --------------------------------------


async def _noop() -> None:
    return None


def _retry(param: str, value: Any) -> None:
    Retry(**{param: value})


def _tool(param: str, value: Any) -> None:
    tool(**{"effect": "read", param: value})(_noop)


def _with_options(param: str, value: Any) -> None:
    _world.lookup.with_options(**{param: value})


def _system(param: str, value: Any) -> None:
    base: dict[str, Any] = {"store": MemoryStore(), "actors": [Fuzzer]}
    ActorSystem(**{**base, param: value})


def _message(param: str, value: Any) -> None:
    if param == "cls":
        message(value)
        return

    @attrs.define
    class M:
        x: int = 0

    message(M, **{param: value})


def _idem(param: str, value: Any) -> None:
    args: dict[str, Any] = {"actor_id": "a", "step_seq": 1, "index": 0}
    idempotency_key(**{**args, param: value})


def _actor_class(param: str, value: Any) -> None:
    types.new_class(
        "Fuzzed", (Actor[Book],), {param: value}, lambda ns: ns.update(__module__=__name__)
    )


SYNC_CASES: dict[str, tuple[Callable[[str, Any], None], dict[str, str]]] = {
    "Retry": (
        _retry,
        {
            "attempts": "int",
            "initial": "float",
            "factor": "float",
            "max_delay": "float_or_none",
            "jitter": "bool",
            "on": "class",
        },
    ),
    "tool": (
        _tool,
        {
            "effect": "none",
            "idempotent": "bool",
            "reconcile": "callable_or_none",
            "name": "id_or_none",
            "retry": "none",
            "timeout": "float_or_none",
        },
    ),
    "Tool.with_options": (_with_options, {"retry": "none", "timeout": "float_or_none"}),
    "ActorSystem": (
        _system,
        {
            "store": "none",
            "actors": "none",
            "messages": "none",
            "shutdown_grace": "float",
            "recover_on_start": "bool",
            "owner": "id_or_none",
            "lease_ttl": "float",
            "max_actors": "int_or_none",
            "passivate_after": "float_or_none",
            "poll_interval": "float",
            "reply_poll_interval": "float_or_none",
            "client": "bool",
        },
    ),
    "message": (_message, {"cls": "class_or_none", "name": "id_or_none", "aliases": "names"}),
    "idempotency_key": (
        _idem,
        {"actor_id": "id", "step_seq": "int", "index": "int", "task": "task_path"},
    ),
    "Actor subclass": (_actor_class, {"name": "id_or_none", "aliases": "names"}),
}


@pytest.mark.parametrize("case", sorted(SYNC_CASES))
def test_constructors_refuse_hostile_values(case: str) -> None:
    """A constructor or decorator given a hostile value: a typed error, or a value its
    parameter takes."""
    fn, params = SYNC_CASES[case]
    f = Findings(case)
    for param, kind in params.items():
        for value in values():
            try:
                fn(param, HOSTILE[value])
                exc: BaseException | None = None
            except Exception as e:
                exc = e
            judge(f, param, kind, value, outcome_of(exc))
    f.check()


def test_store_constructors_refuse_hostile_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SqliteStore`` (opened), ``open_store`` and ``ops.opened``: a typed error, never a
    file where there should be none."""
    monkeypatch.chdir(tmp_path)  # a relative path (a hostile one) lands here
    f = Findings("SqliteStore")
    params = {"path": "any", "durability": "none", "read_only": "bool"}
    params |= {"busy_timeout": "float", "commit_on_loop": "bool"}

    async def one(param: str, value: Any) -> None:
        base: dict[str, Any] = {"path": str(tmp_path / "s.db")}
        store = SqliteStore(**{**base, param: value})
        await store.open()
        await store.close()

    for param, kind in params.items():
        for v in values():
            if param == "path" and v in ("big", "empty"):
                continue  # a file name: OS-dependent, not the library's to refuse
            try:
                anyio.run(one, param, HOSTILE[v], backend="asyncio")
                exc: BaseException | None = None
            except Exception as e:
                exc = e
            judge(f, param, kind, v, outcome_of(exc))
    f.check()
    g = Findings("open_store")
    for v in values():
        try:
            open_store(HOSTILE[v])
            exc = None
        except Exception as e:
            exc = e
        judge(g, "url", "none", v, outcome_of(exc))
    g.check()
    # a path given as text names a file: a surrogate-escaped name is a valid POSIX name
    stray = [p.name for p in tmp_path.iterdir() if not p.name.startswith(("s.db", "bad "))]
    assert not stray, f"files where no store was asked for: {stray}"
    assert set(stores_pkg.__all__) == {"MemoryStore", "PostgresStore", "SqliteStore", "open_store"}


# -- a live system ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="actorlog-fuzz-") as d:
        path = os.path.join(d, "template.db")
        anyio.run(_world.build_store, path, backend="asyncio")
        yield path


@dataclass
class Env:
    system: ActorSystem
    path: str
    victims: int = 0

    async def victim(self) -> str:
        """A fresh actor with one step, for calls that end or change it."""
        self.victims += 1
        aid = f"victim{self.victims}"
        ref = await self.system.spawn(Fuzzer, aid)
        await ref.ask(Note("v"), message_id=f"{aid}-m")
        return aid


@asynccontextmanager
async def live(path: str) -> AsyncIterator[Env]:
    async with ActorSystem(SqliteStore(path), actors=[Fuzzer], shutdown_grace=0) as system:
        for aid in ("alpha", "beta"):
            await system.spawn(Fuzzer, aid, snapshot_every=None)  # no background snapshots
        _world.ctx_ref[:] = [system.ref(Fuzzer, "beta")]
        yield Env(system, path)


LiveCall = Callable[[Env, str, Any], Awaitable[object]]


async def _spawn(env: Env, param: str, value: Any) -> None:
    if param == "cls":
        await env.system.spawn(value, "spawned")
    elif param == "actor_id":
        await env.system.spawn(Fuzzer, value)
    else:
        await env.system.spawn(Fuzzer, "spawned", **{param: value})


async def _ref(env: Env, param: str, value: Any) -> None:
    if param == "cls":
        env.system.ref(value, "alpha")
    else:
        env.system.ref(Fuzzer, value)


async def _send(env: Env, param: str, value: Any) -> None:
    ref = env.system.ref(Fuzzer, "alpha")
    if param == "msg":
        await ref.send(value)
    else:
        await ref.send(Note("x"), message_id=value)


async def _ask(env: Env, param: str, value: Any) -> None:
    ref = env.system.ref(Fuzzer, "alpha")
    if param == "msg":
        await ref.ask(value)
    elif param == "message_id":
        await ref.ask(Note("x"), message_id=value)
    else:
        with anyio.move_on_after(2):
            try:
                await ref.ask(Note("x"), timeout=value)
            except TimeoutError:
                pass  # the documented end of an ask that timed out


async def _ask_stream(env: Env, param: str, value: Any) -> None:
    ref = env.system.ref(Fuzzer, "alpha")
    if param == "msg":
        stream = ref.ask_stream(value)
    elif param == "message_id":
        stream = ref.ask_stream(Note("x"), message_id=value)
    else:
        stream = ref.ask_stream(Note("x"), buffer=value)
    async for _ in stream:
        pass


async def _send_later(env: Env, param: str, value: Any) -> None:
    ref = env.system.ref(Fuzzer, "beta")
    base: dict[str, Any] = {} if param == "at" else {"delay": 3600.0}
    if param == "ref":
        await env.system.send_later(value, Note("x"), delay=3600.0)
    elif param == "msg":
        await env.system.send_later(ref, value, delay=3600.0)
    else:
        await env.system.send_later(ref, Note("x"), **{**base, param: value})


_SCHEDULED = [0]


async def _schedule(env: Env, param: str, value: Any) -> None:
    _SCHEDULED[0] += 1
    ref = env.system.ref(Fuzzer, "beta")
    base: dict[str, Any] = {"every": __import__("datetime").timedelta(hours=1)}
    if param == "cron":
        base = {}
    if param == "name":
        await env.system.schedule(value, ref, Note("x"), **base)
    elif param == "ref":
        await env.system.schedule(f"s{_SCHEDULED[0]}", value, Note("x"), **base)
    elif param == "msg":
        await env.system.schedule(f"s{_SCHEDULED[0]}", ref, value, **base)
    else:
        await env.system.schedule(f"s{_SCHEDULED[0]}", ref, Note("x"), **{**base, param: value})


async def _named(env: Env, param: str, value: Any, method: str) -> None:
    await getattr(env.system, method)(value)


async def _lifecycle(env: Env, param: str, value: Any, method: str) -> None:
    aid = value if param == "actor_id" else await env.victim()
    if method == "delete" and param != "actor_id":
        await env.system.terminate(aid)
    kwargs = {} if param == "actor_id" else {param: value}
    await getattr(env.system, method)(aid, **kwargs)


async def _resolve(env: Env, param: str, value: Any) -> None:
    base: dict[str, Any] = {"actor_id": "alpha", "intent_seq": 2, "fail": "no"}
    if param in ("result", "retry"):
        base.pop("fail")
    await env.system.resolve(**{**base, param: value})


async def _rule(env: Env, param: str, value: Any) -> None:
    """A ruling on a fresh cancelled write in doubt (``_world.Loser``), so each value meets
    the path that records one."""
    env.victims += 1
    aid = f"loser{env.victims}"
    env.system.register(_world.Loser)
    await env.system.spawn(_world.Loser, aid)
    await env.system.ref(_world.Loser, aid).ask(Note("t"), message_id=f"{aid}-m")
    (call,) = await ops.calls_needing_ruling(env.system.store, aid)
    with anyio.fail_after(10):  # the runtime's in_doubt event, written in the background
        while not await env.system.store.read_events(aid):
            await anyio.sleep(0.01)
    base: dict[str, Any] = {"actor_id": aid, "intent_seq": call.intent_seq, "fail": "no"}
    if param == "result":
        base.pop("fail")
    await env.system.resolve(**{**base, param: value})


async def _sync_reads(env: Env, param: str, value: Any, method: str) -> None:
    getattr(env.system, method)(value)


async def _wait_in_doubt(env: Env, param: str, value: Any) -> None:
    with anyio.move_on_after(0.1):
        if param == "actor_id":
            await env.system.wait_in_doubt(value)
        else:
            await env.system.wait_in_doubt("alpha", poll=value)


async def _read_state(env: Env, param: str, value: Any) -> None:
    if param == "cls":
        await env.system.read_state(value, "alpha")
    else:
        await env.system.read_state(Fuzzer, value)


async def _register(env: Env, param: str, value: Any) -> None:
    env.system.register(value)


def _bind(fn: Callable[..., Awaitable[None]], method: str) -> LiveCall:
    async def call(env: Env, param: str, value: Any) -> None:
        await fn(env, param, value, method)

    return call


LIVE_CASES: dict[str, tuple[LiveCall, dict[str, str]]] = {
    "ActorSystem.spawn": (
        _spawn,
        {
            "cls": "none",
            "actor_id": "id",
            "snapshot_every": "int_or_none",
            "snapshot_every_seconds": "float_or_none",
            "snapshot_keep": "int",
            "recovery_budget": "float_or_none",
            "retention": "any",
        },
    ),
    "ActorSystem.ref": (_ref, {"cls": "none", "actor_id": "id"}),
    "ActorRef.send": (_send, {"msg": "any", "message_id": "id_or_none"}),
    "ActorRef.ask": (_ask, {"msg": "any", "message_id": "id_or_none", "timeout": "float_or_none"}),
    "ActorRef.ask_stream": (
        _ask_stream,
        {"msg": "any", "message_id": "id_or_none", "buffer": "int"},
    ),
    "ActorSystem.send_later": (
        _send_later,
        {
            "ref": "none",
            "msg": "any",
            "delay": "seconds",
            "at": "datetime",
            "message_id": "id_or_none",
        },
    ),
    "ActorSystem.schedule": (
        _schedule,
        {
            "name": "id",
            "ref": "none",
            "msg": "any",
            "every": "seconds_or_none",
            "cron": "text_or_none",
            "missed": "none",
            "start": "datetime_or_none",
        },
    ),
    "ActorSystem.cancel_timer": (_bind(_named, "cancel_timer"), {"timer_id": "id"}),
    "ActorSystem.unschedule": (_bind(_named, "unschedule"), {"name": "id"}),
    "ActorSystem.timers": (_bind(_named, "timers"), {"actor_id": "id_or_none"}),
    "ActorSystem.ownership": (_bind(_named, "ownership"), {"actor_id": "id"}),
    "ActorSystem.restart": (_bind(_lifecycle, "restart"), {"actor_id": "id"}),
    "ActorSystem.cancel": (
        _bind(_lifecycle, "cancel"),
        {"actor_id": "id", "reason": "text", "by": "text"},
    ),
    "ActorSystem.terminate": (
        _bind(_lifecycle, "terminate"),
        {"actor_id": "id", "reason": "text", "by": "text"},
    ),
    "ActorSystem.delete": (
        _bind(_lifecycle, "delete"),
        {"actor_id": "id", "reason": "text", "by": "text", "force": "bool"},
    ),
    "ActorSystem.resolve": (
        _resolve,
        {
            "actor_id": "id",
            "intent_seq": "int",
            "result": "any",
            "retry": "bool",
            "fail": "text_or_none",
            "by": "text_or_none",
            "reason": "text",
        },
    ),
    # a ruling on a cancelled write in doubt (issue 25): the path that records one
    "ActorSystem.resolve.rule": (
        _rule,
        {"result": "any", "fail": "text_or_none", "by": "text_or_none", "reason": "text"},
    ),
    "ActorSystem.status": (_bind(_sync_reads, "status"), {"actor_id": "id"}),
    "ActorSystem.error": (_bind(_sync_reads, "error"), {"actor_id": "id"}),
    "ActorSystem.in_doubt": (_bind(_sync_reads, "in_doubt"), {"actor_id": "id"}),
    "ActorSystem.last_recovery": (_bind(_sync_reads, "last_recovery"), {"actor_id": "id"}),
    "ActorSystem.wait_in_doubt": (_wait_in_doubt, {"actor_id": "id", "poll": "float"}),
    "ActorSystem.register": (_register, {"cls": "none"}),
    "ActorSystem.read_state": (_read_state, {"cls": "none", "actor_id": "id"}),
}


async def operator_tools_work(path: str) -> None:
    """Listing, verify (clean), every history and the timers work on the store; a new
    system recovers every actor that is not ended (no quarantine)."""
    async with ops.opened(f"sqlite:///{path}") as store:
        actors = await ops.list_actors(store)
        report = await ops.verify(store)
        assert report.ok, f"verify after the fuzz: {report.findings}"
        for a in actors:
            await ops.history(store, a.actor_id)
            async for _ in ops.export(store, a.actor_id):
                pass
        await ops.timers(store)
        bad = [(a.actor_id, a.status, a.problem) for a in actors if a.status == "quarantined"]
        assert not bad, f"quarantined after the fuzz: {bad}"
    async with ActorSystem(SqliteStore(path), actors=[Fuzzer], shutdown_grace=0) as system:
        for a in actors:
            if a.status in ("finished", "terminated") or a.actor_type != "fuzz.fuzzer":
                continue
            ref = await system.spawn(Fuzzer, a.actor_id)
            await ref.ask(Note("after"))
            assert system.status(a.actor_id) not in ("quarantined", "stopped"), a


@pytest.mark.parametrize("case", sorted(LIVE_CASES))
def test_system_calls_refuse_hostile_values(case: str, template: str, tmp_path: Path) -> None:
    """A call on a running system given a hostile value: a typed error that stores
    nothing, or a value its parameter takes; afterwards the operator tools work."""
    fn, params = LIVE_CASES[case]
    path = _world.fresh_copy(template, str(tmp_path))
    f = Findings(case)
    victims = case.rsplit(".", 1)[-1] in ("cancel", "terminate", "delete", "rule")

    async def go() -> None:
        async with live(path) as env:
            await settled_dump(path)  # a recovery's events, written in the background
            for param, kind in params.items():
                for value in values():
                    before = _world.dump(path)
                    exc: BaseException | None = None
                    try:
                        with anyio.fail_after(10):
                            await fn(env, param, HOSTILE[value])
                    except Exception as e:
                        exc = e
                    out = outcome_of(exc)
                    judge(f, param, kind, value, out)
                    if exc is None:
                        # what it stored may go on (a step, a timer firing): let it land
                        await settled_dump(path)
                    # a lifecycle case spawns its victim first: that is stored
                    elif not (victims and param != "actor_id"):
                        changed = _world.diff(before, _world.dump(path))
                        if changed:
                            f.add(param, value, f"{out} but stored: {changed}")
        await operator_tools_work(path)

    try:
        anyio.run(go, backend="asyncio")
    except Exception as exc:
        f.add("*", "*", f"the operator tools fail afterwards: {outcome_of(exc)}")
    f.check()


async def settled_dump(path: str) -> list[Any]:
    """The store's rows once the runtime's background writes (a snapshot after a step, a
    recovery's events) have landed: two equal dumps 50 ms apart."""
    last = _world.dump(path)
    while True:
        await anyio.sleep(0.05)
        now = _world.dump(path)
        if now == last:
            return now
        last = now


@pytest.mark.parametrize("method", sorted({m for m, _ in CTX_PARAMS}))
def test_context_calls_refuse_hostile_values(method: str, template: str, tmp_path: Path) -> None:
    """``ctx.<method>`` in a handler, given a hostile value: a typed error at the call (the
    handler catches it and goes on) or a value its parameter takes; afterwards the actor
    recovers (a refused call left no trace in the step's effects) and the operator tools
    work."""
    path = _world.fresh_copy(template, str(tmp_path))
    f = Findings(f"Context.{method}")
    params = {p: kind for (m, p), kind in CTX_PARAMS.items() if m == method}

    async def go() -> None:
        async with live(path) as env:
            ref = env.system.ref(Fuzzer, "alpha")
            for param in params:
                for value in values():
                    await ref.ask(Try(method, param, value))
        await operator_tools_work(path)

    CTX_OUTCOMES.clear()
    try:
        anyio.run(go, backend="asyncio")
    except Exception as exc:
        f.add("*", "*", f"the actor or the operator tools fail afterwards: {outcome_of(exc)}")
    for (_, param, value), outcome in CTX_OUTCOMES.items():
        judge(f, param, params[param], value, outcome)
    f.check()


# -- the operator API on a stopped store -------------------------------------------------------


async def _op(store: Any, fn: Callable[..., Any], base: dict[str, Any], param: str, v: Any) -> None:
    kwargs = {**base, param: v}
    got = fn(store, **kwargs)
    if inspect.isasyncgen(got):
        async for _ in got:
            pass
    else:
        await got


OPS_CASES: dict[str, tuple[Callable[..., Any], dict[str, Any], dict[str, str]]] = {
    "ops.actor_status": (ops.actor_status, {"actor_id": "alpha"}, {"actor_id": "id"}),
    "ops.history": (ops.history, {"actor_id": "alpha"}, {"actor_id": "id", "since": "int"}),
    "ops.calls_needing_ruling": (
        ops.calls_needing_ruling,
        {"actor_id": "alpha"},
        {"actor_id": "id"},
    ),
    "ops.iter_history": (
        ops.iter_history,
        {"actor_id": "alpha"},
        {"actor_id": "id", "since": "int"},
    ),
    "ops.show": (ops.show, {"actor_id": "alpha", "seq": 1}, {"actor_id": "id", "seq": "int"}),
    "ops.verify": (ops.verify, {}, {"actor_id": "id_or_none", "progress": "callable_or_none"}),
    "ops.export": (ops.export, {"actor_id": "alpha"}, {"actor_id": "id", "raw": "bool"}),
    "ops.timers": (ops.timers, {}, {"actor_id": "id_or_none"}),
    "ops.deleted": (ops.deleted, {}, {"actor_id": "id_or_none"}),
    "ops.fork_effects": (
        ops.fork_effects,
        {"actor_id": "alpha", "at": 2},
        {"actor_id": "id", "at": "int"},
    ),
    "ops.list_actors_page": (
        ops.list_actors_page,
        {},
        {
            "status": "text_or_none",
            "actor_type": "text_or_none",
            "search": "text_or_none",
            "sort": "none",
            "descending": "bool",
            "offset": "int",
            "limit": "int",
            "status_limit": "int",
        },
    ),
    "ops.compact": (
        ops.compact,
        {"actor_id": "alpha", "retention": "all"},
        {"actor_id": "id_or_none", "retention": "any", "by": "text_or_none"},
    ),
    "ops.fork": (
        ops.fork,
        {"actor_id": "alpha", "at": 2, "new_id": "forked", "yes": True},
        {"actor_id": "id", "at": "int", "new_id": "id", "yes": "bool", "by": "text_or_none"},
    ),
    "ops.resolve": (
        ops.resolve,
        {"actor_id": "alpha", "intent_seq": 2, "fail": "no"},
        {"actor_id": "id", "intent_seq": "int", "result": "any", "by": "text_or_none"},
    ),
    "ops.cancel": (
        ops.cancel,
        {"actor_id": "alpha"},
        {"actor_id": "id", "by": "text_or_none", "reason": "text"},
    ),
    "ops.terminate": (
        ops.terminate,
        {"actor_id": "nobody"},
        {"actor_id": "id", "by": "text_or_none", "reason": "text"},
    ),
    "ops.restart": (
        ops.restart,
        {"actor_id": "alpha"},
        {"actor_id": "id", "by": "text_or_none", "reason": "text"},
    ),
    "ops.delete": (
        ops.delete,
        {"actor_id": "nobody"},
        {"actor_id": "id", "yes": "bool", "force": "bool", "by": "text_or_none", "reason": "text"},
    ),
}


@pytest.mark.parametrize("case", sorted(OPS_CASES))
def test_operator_api_refuses_hostile_values(case: str, template: str, tmp_path: Path) -> None:
    """``actorlog.ops`` on a store no runtime holds, given a hostile value: a typed error
    that stores nothing, or a value its parameter takes; the operator tools work after."""
    fn, base, params = OPS_CASES[case]
    path = _world.fresh_copy(template, str(tmp_path))
    f = Findings(case)

    async def go() -> None:
        async with ops.opened(f"sqlite:///{path}", read_only=False) as store:
            for param, kind in params.items():
                for value in values():
                    before = _world.dump(path)
                    exc: BaseException | None = None
                    try:
                        with anyio.fail_after(10):
                            await _op(store, fn, base, param, HOSTILE[value])
                    except Exception as e:
                        exc = e
                    out = outcome_of(exc)
                    judge(f, param, kind, value, out)
                    if exc is not None:
                        changed = _world.diff(before, _world.dump(path))
                        if changed:
                            f.add(param, value, f"{out} but stored: {changed}")
        await operator_tools_work(path)

    try:
        anyio.run(go, backend="asyncio")
    except Exception as exc:
        f.add("*", "*", f"the operator tools fail afterwards: {outcome_of(exc)}")
    f.check()


def test_every_public_callable_is_fuzzed() -> None:
    """A new public callable gets a fuzz case (or a reason here why it needs none)."""
    covered = set(SYNC_CASES) | set(LIVE_CASES) | set(OPS_CASES)
    covered |= {f"Context.{m}" for m, _ in CTX_PARAMS} | {"open_store"}
    no_input = {
        # exception types, result types and plain data the library hands out
        "Happened", "NotHappened", "Lease", "OwnershipChange", "RecoveryReport", "Tool",
        "Actor", "ActorRef", "Context", "MemoryStore", "SqliteStore", "PostgresStore",
        "ops.list_actors", "ops.leases", "ops.waiting_intents", "ops.waiting_rulings", "ops.opened",
        "ops.to_json", "ops.timer_view", "ops.Progress", "StepEvent", "AskStream",
    }  # fmt: skip
    public = {n for n in actorlog.__all__ if callable(getattr(actorlog, n))}
    public |= {
        f"ops.{n}"
        for n in ops.__all__
        if callable(getattr(ops, n)) and not isinstance(getattr(ops, n), type)
    }
    public |= {
        f"ActorSystem.{n}"
        for n, _ in inspect.getmembers(ActorSystem, callable)
        if not n.startswith("_") and n not in ("ownership_changes",)
    }
    public |= {
        f"Context.{n}"
        for n, _ in inspect.getmembers(actorlog.Context, callable)
        if not n.startswith("_")
        and n not in ("now", "random", "uuid", "check_consumed", "settle_abandoned", "stop")
    }
    public |= {"ActorRef.send", "ActorRef.ask", "ActorRef.ask_stream", "Tool.with_options"}
    public |= {"open_store"}
    missing = sorted(public - covered - no_input - {"Retry", "tool", "message", "idempotency_key"})
    assert not missing, f"public callables without a fuzz case: {missing}"
