"""``import actorlog`` imports only what a run needs (issue 17, "A faster start").

Each check runs in a fresh interpreter (this test session has imported everything): a module
that a future change imports eagerly again makes it fail. What is left out, and when it comes:

* OpenTelemetry: when the application imports it (to configure an SDK); until then actorlog's
  spans and metrics are no-ops that import nothing. A provider configured after
  ``import actorlog``, even after a first run, gets the same spans and metrics as always.
* cattrs: at the first message, state or reply that is structured or unstructured.
* asyncpg and the PostgreSQL store, the memory store: when ``actorlog.stores`` is asked for
  them.
* asyncio (with ssl and concurrent.futures): by what runs its loop; a run on trio never
  imports it. The CLI, the HTML timeline, the console, the operator API and the contract kit (and
  with them argparse, pytest): when they are imported.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: modules (and their submodules) that ``import actorlog, actorlog.stores`` must not import
NOT_AT_IMPORT = (
    "opentelemetry",
    "cattrs",
    "asyncpg",
    "argparse",
    "getpass",
    "hashlib",
    "pytest",
    "actorlog.ops",
    "actorlog.web",
    "actorlog.testing",
    "actorlog.integrations",
    "actorlog.stores.postgres",
    "actorlog.stores.memory",
    "actorlog.cli._main",
    "actorlog._views.html",
    "actorlog._views.term",
    "actorlog.testing._replay",
    # issue 28: imported by what uses them, and anyio's streams and backend only at a run
    "actorlog._cluster",
    "actorlog._journal.leases",
    "anyio.streams",
    "anyio._backends",
    "uuid",
    "random",
    "pathlib",
    # issue 28, third round: the order of outcomes replayed to several tasks of one step
    # (and bisect with it), imported by the replay of such a step
    "actorlog._effects.sequencer",
    "bisect",
    # issue 28, fourth round: asyncio is imported by what runs its loop (anyio.run on its
    # asyncio backend), never by actorlog: a run on trio does without it
    "asyncio",
    "concurrent",
    "ssl",
)


def _run(script: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_import_actorlog_leaves_out_what_a_run_may_not_need() -> None:
    out = _run(
        f"""
        import sys
        at_start = set(sys.modules)  # the interpreter's (and an editable install's finder's)
        import actorlog
        import actorlog.stores
        from actorlog import Actor, ActorSystem, Context, SqliteStore, tool

        unwanted = {NOT_AT_IMPORT!r}
        loaded = sorted(
            m for m in set(sys.modules) - at_start
            if any(m == u or m.startswith(u + ".") for u in unwanted)
        )
        print(loaded)
        """
    )
    assert out == "[]", f"imported by `import actorlog`: {out}"


def test_lazily_loaded_names_still_resolve() -> None:
    out = _run(
        """
        import sys
        import actorlog
        from actorlog.stores import MemoryStore
        from actorlog._journal import codec as _codec

        assert actorlog.MemoryStore is MemoryStore
        assert "cattrs" not in sys.modules
        assert _codec.converter is _codec.converter  # made once, on first use
        assert "cattrs.preconf.json" in sys.modules
        print("ok")
        """
    )
    assert out == "ok"


def test_a_provider_configured_after_a_run_gets_every_span_and_metric() -> None:
    """A first run with OpenTelemetry never imported; then the application configures the
    SDK in the same process: the next run (a recovery, a step) is traced and measured as
    usual, the replayed step a child of the recover span."""
    out = _run(
        """
        import sys
        import tempfile
        import anyio
        from actorlog import ActorSystem
        from actorlog.stores import SqliteStore
        from tests.telemetry.telemetry_agents import Ask, Researcher

        path = tempfile.mkdtemp() + "/agents.db"

        async def first() -> None:
            async with ActorSystem(SqliteStore(path), actors=[Researcher]) as system:
                ref = await system.spawn(Researcher, "r")
                await ref.ask(Ask("one"), message_id="m1")

        anyio.run(first)
        assert not [m for m in sys.modules if m.startswith("opentelemetry")], "OTel loaded"

        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

        async def second() -> None:
            async with ActorSystem(SqliteStore(path), actors=[Researcher]) as system:
                ref = await system.spawn(Researcher, "r")
                await ref.ask(Ask("three"), message_id="m3")

        anyio.run(second)
        spans = exporter.get_finished_spans()
        names = sorted({s.name for s in spans})
        recover = [s for s in spans if s.name == "actorlog.recover"]
        replayed = [s for s in spans if s.name == "actorlog.replay_step"]
        steps = [s for s in spans if s.name == "actorlog.step"]
        calls = [s for s in spans if s.name == "actorlog.tool_call"]
        assert len(recover) == 1 and len(replayed) == 1 and steps and calls, names
        assert replayed[0].parent.span_id == recover[0].context.span_id
        assert all(c.parent is not None for c in calls), "tool calls are children of steps"
        step_ids = {s.context.span_id for s in steps}
        assert any(c.parent.span_id in step_ids for c in calls)
        data = reader.get_metrics_data()
        metric_names = sorted(
            m.name
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            if sm.scope.name == "actorlog"
            for m in sm.metrics
        )
        print(names)
        print(metric_names)
        """
    )
    names, metric_names = out.splitlines()
    assert "'actorlog.recover'" in names and "'actorlog.step'" in names, names
    for metric in (
        "actorlog.append.duration",
        "actorlog.append.batch_size",
        "actorlog.recovery.duration",
        "actorlog.intents.in_doubt",
    ):
        assert f"'{metric}'" in metric_names, metric_names


def test_a_run_of_plain_messages_and_results_never_imports_cattrs() -> None:
    """Plain values (scalars, attrs classes of plain fields) are encoded and decoded without
    cattrs: a run, a snapshot and a recovery in a fresh process leave it unimported."""
    out = _run(
        """
        import sys
        import tempfile
        import anyio
        import attrs
        from actorlog import Actor, ActorSystem, Context, tool
        from actorlog.stores import SqliteStore

        @attrs.define
        class Add:
            n: int
            note: str = ""

        @attrs.define
        class Total:
            sum: int = 0
            last: str = ""

        @tool(effect="read")
        async def describe(n: int) -> str:
            return f"n={n}"

        class Adder(Actor[Total]):
            snapshot_every = 2

            async def receive(self, ctx: Context, msg: Add) -> int:
                self.state.last = await ctx.call(describe, msg.n)
                self.state.sum += msg.n
                return self.state.sum

        path = tempfile.mkdtemp() + "/agents.db"

        async def main() -> int:
            async with ActorSystem(SqliteStore(path), actors=[Adder]) as system:
                ref = await system.spawn(Adder, "a")
                for i in range(3):
                    await ref.ask(Add(i, note="x"), message_id=f"m{i}")
            async with ActorSystem(SqliteStore(path), actors=[Adder]) as system:
                ref = await system.spawn(Adder, "a")  # recovers: snapshot + tail
                return int(await ref.ask(Add(10), message_id="m3"))

        assert anyio.run(main) == 13
        print(sorted(m for m in sys.modules if m.startswith("cattrs")))
        """
    )
    assert out == "[]", f"cattrs imported: {out}"


_RESUMED = """
import os
import signal
import sys

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.stores import SqliteStore


@attrs.define
class Go:
    n: int


@attrs.define
class Count:
    steps: int = 0


@tool(effect="read", name="t.counts")
async def counts(n: int) -> dict[str, int]:
    if n == 2 and os.environ.get("KILL"):
        os.kill(os.getpid(), signal.SIGKILL)  # mid-step: two calls done, the third in doubt
    return {"n": n}


class Lister(Actor[Count], name="t.lister"):
    async def receive(self, ctx: Context, msg: Go) -> list[str]:
        self.state.steps += 1
        found = [await ctx.call(counts, i) for i in range(msg.n)]
        return [str(d["n"]) for d in found]


async def main(path: str) -> list[str]:
    async with ActorSystem(SqliteStore(path), actors=[Lister]) as system:
        ref = await system.spawn(Lister, "l")
        return await ref.ask(Go(3), message_id="m1")


reply = anyio.run(main, sys.argv[1])
assert reply == ["0", "1", "2"] and type(reply) is list, reply
print(sorted(m for m in sys.modules if m.startswith("cattrs")))
"""


def test_a_step_resumed_after_a_crash_replies_a_plain_list_without_cattrs(
    tmp_path: Path,
) -> None:
    """A handler annotated ``-> list[str]`` whose tool returns ``dict[str, int]``: killed
    mid-step, the step is resumed by a fresh process and its reply reaches the caller
    without cattrs' import (issue 25: that import was on the path from restart to reply,
    the slowest part of it). The values come back as cattrs makes them: new containers of
    the same items."""
    out = _kill_and_resume(tmp_path, "lister.py", _RESUMED)
    assert out == "[]", f"cattrs imported: {out}"


def _kill_and_resume(tmp_path: Path, name: str, source: str) -> str:
    """Run ``source`` as a script on a SQLite file with KILL set (it SIGKILLs itself
    mid-step), then again in a fresh process that resumes the step: its stdout."""
    script = tmp_path / name
    script.write_text(source)
    db = str(tmp_path / "agents.db")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    killed = subprocess.run(
        [sys.executable, str(script), db], env={**env, "KILL": "1"}, capture_output=True
    )
    assert killed.returncode == -9, killed.stderr
    resumed = subprocess.run(
        [sys.executable, str(script), db], env=env, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    return resumed.stdout.strip()


#: modules that a process resuming an actor on SQLite (no leases, no SDK) has not imported
#: when its first resumed tool call runs (issue 28: start to first resumed effect)
NOT_AT_RESUME = (
    # anyio's asyncio backend (with its streams) and asyncio are what a run on asyncio imports
    *(
        m
        for m in NOT_AT_IMPORT
        if not m.startswith("anyio.") and m not in ("asyncio", "concurrent", "ssl")
    ),
    # actorlog._cluster: leases, ownership, remote asks (stores with capabilities.leases);
    # uuid: ids of messages sent without one, ctx.uuid(), client mode; random: ctx.random(),
    # retry jitter
    "urllib",
    "shutil",
    "tempfile",
)

_FIRST_EFFECT = """
import sys

AT_START = set(sys.modules)  # the interpreter's (and an editable install's finder's)

import os
import signal

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.stores import SqliteStore

UNWANTED = {unwanted!r}


@tool(effect="read", name="t.effect")
async def effect(n: int) -> int:
    if os.environ.get("KILL") and n == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # mid-step: calls 0 and 1 logged, 2 in doubt
    if not os.environ.get("KILL"):
        loaded = sorted(
            m for m in set(sys.modules) - AT_START
            if any(m == u or m.startswith(u + ".") for u in UNWANTED)
        )
        print(loaded, flush=True)
        os._exit(0)  # the first resumed effect: what is loaded by now is what it cost
    return n


@attrs.define
class Go:
    n: int


@attrs.define
class Done:
    steps: int = 0


class Runner(Actor[Done], name="t.runner"):
    async def receive(self, ctx: Context, msg: Go) -> int:
        self.state.steps += 1
        return sum([await ctx.call(effect, i) for i in range(msg.n)])


async def main(path: str) -> None:
    async with ActorSystem(SqliteStore(path), actors=[Runner]) as system:
        ref = await system.spawn(Runner, "r")
        await ref.ask(Go(3), message_id="m1")


anyio.run(main, sys.argv[1])
"""


def test_a_resumed_process_reaches_its_first_effect_without_what_it_does_not_use(
    tmp_path: Path,
) -> None:
    """Killed mid-step, the actor is resumed by a fresh process: by its first resumed tool
    call that process has imported none of NOT_AT_RESUME (leases, the operator API, the CLI,
    cattrs for plain values, OpenTelemetry without an SDK, pathlib ...): each is time between
    the restart and the first effect (issue 28)."""
    source = _FIRST_EFFECT.replace("{unwanted!r}", repr(NOT_AT_RESUME))
    out = _kill_and_resume(tmp_path, "runner.py", source)
    assert out == "[]", f"imported before the first effect: {out}"


def test_the_lazily_loaded_public_names_are_the_same_objects_and_listed() -> None:
    """``OwnershipChange`` and ``Lease`` load on first use and are listed by ``dir()``
    before that, named ``actorlog.X`` whichever import path loaded them first."""
    out = _run(
        """
        import sys
        import actorlog

        assert "actorlog._cluster.leases" not in sys.modules
        assert {"Lease", "OwnershipChange"} <= set(dir(actorlog))
        from actorlog._cluster.leases import OwnershipChange as direct

        assert direct.__module__ == "actorlog"
        from actorlog import Lease, OwnershipChange
        from actorlog._journal.leases import Lease as record

        assert OwnershipChange is direct and Lease is record
        assert Lease.__module__ == "actorlog" and actorlog.Lease is Lease
        print("ok")
        """
    )
    assert out == "ok"


def test_a_run_and_a_recovery_on_trio_never_import_asyncio(tmp_path: Path) -> None:
    """On trio, a SQLite run, its recovery by a fresh system and its answer to a retried
    ask never import asyncio (nor concurrent.futures, which only asyncio needs): actorlog's
    modules look up a running asyncio loop only if asyncio is imported (issue 28: before,
    ``import actorlog`` imported it, about a fifth of the import's time on trio). trio itself
    imports ssl and sockets."""
    out = _run(
        f"""
        import sys

        import anyio
        import attrs
        from actorlog import Actor, ActorSystem, Context, tool
        from actorlog.stores import SqliteStore

        assert "asyncio" not in sys.modules  # trio and anyio do not import it either

        @attrs.define
        class Go:
            n: int

        @attrs.define
        class Seen:
            steps: int = 0

        @tool(effect="read", name="t.plus")
        async def plus(n: int) -> int:
            await anyio.sleep(0)
            return n + 1

        class Adder(Actor[Seen], name="t.adder"):
            async def receive(self, ctx: Context, msg: Go) -> int:
                self.state.steps += 1
                async with anyio.create_task_group() as tg:  # a step's own tasks
                    tg.start_soon(ctx.call, plus, 0)
                return sum([await ctx.call(plus, i) for i in range(msg.n)])

        async def main(path: str, message_id: str) -> int:
            async with ActorSystem(SqliteStore(path), actors=[Adder]) as system:
                ref = await system.spawn(Adder, "a")
                return int(await ref.ask(Go(3), message_id=message_id))

        path = {str(tmp_path / "agents.db")!r}
        got = [anyio.run(main, path, m, backend="trio") for m in ("m1", "m1", "m2")]
        assert got == [6, 6, 6], got
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("asyncio", "concurrent")))
        """
    )
    assert out == "[]", f"imported on trio: {out}"
