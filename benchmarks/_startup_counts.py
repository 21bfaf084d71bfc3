"""``benchmarks.startup``'s floors and its load-independent counts: the floor scripts (Part
3), the Python function calls of a resumed process by phase (Part 4, cProfile) and the
instructions of each phase (Part 5, ``--callgrind``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from ._common import REPO_ROOT

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CALLS",
    "CALLS_FLOOR",
    "DEPENDENCIES",
    "FLOOR",
    "FLOOR_DEPS",
    "RESUME",
    "Calls",
    "calls_floor",
    "calls_round",
    "child_env",
    "instructions",
    "instructions_floors",
    "instructions_round",
]

#: What a run on SQLite with asyncio imports whatever actorlog does (cattrs is imported only
#: for values that are not plain): the floor of its start.
DEPENDENCIES = "import anyio, anyio._backends._asyncio, attrs, sqlite3"

#: Part 3's child: the floor of "a process that starts and makes one durable write".
FLOOR = (
    "import sqlite3, sys, time\n"
    "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "c.execute('PRAGMA journal_mode=WAL'); c.execute('PRAGMA synchronous=FULL')\n"
    "c.execute('CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB)')\n"
    "c.execute('BEGIN'); c.execute('INSERT INTO t (v) VALUES (?)', (b'x' * 64,))\n"
    "c.execute('COMMIT')\n"
    "print(time.monotonic_ns(), time.process_time_ns())\n"
)

#: The same with what a run of actorlog on SQLite imports whatever actorlog does (anyio and
#: its asyncio backend, attrs), timed inside ``anyio.run``: the part of the target
#: that is not actorlog's own.
FLOOR_DEPS = (
    "import anyio, anyio._backends._asyncio, attrs\n"
    + FLOOR.replace("print(time.monotonic_ns(), time.process_time_ns())\n", "")
    + "async def main():\n    await anyio.sleep(0)\n"
    + "    return time.monotonic_ns(), time.process_time_ns()\n"
    + "print(*anyio.run(main))\n"
)


def child_env(pkg: Path | None) -> dict[str, str]:
    """A child's environment: bytecode caching on (as an installed package runs), ``pkg``
    (a package directory, for a build) first on the path."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pkg is not None:
        env["PYTHONPATH"] = str(pkg) + os.pathsep + env.get("PYTHONPATH", "")
    return env


#: Part 4's child: ``ARGV: db phase steps``. Phase ``run`` is killed in the tool call of
#: step 75 %; phase ``resume`` counts the Python function calls from the start of the
#: interpreter (``cProfile`` from the first line) to its first resumed tool call, and prints
#: the running count at three points: the dependencies imported (as ``FLOOR_DEPS`` imports
#: them), ``actorlog`` and its SQLite store imported, the first resumed tool call.
#: The run both children make (CALLS' and RESUME's head define ``at_resume``): phase ``run``
#: is SIGKILLed at step 75 %, phase ``resume`` ends at its first resumed tool call.
_RUN = """
def effect(i):
    if phase == "run" and i == steps * 3 // 4:
        os.kill(os.getpid(), signal.SIGKILL)
    if phase == "resume":
        at_resume()
        os._exit(0)
    return f"value-{i:06d}"

_agent.configure(effect)

async def main():
    async with ActorSystem(SqliteStore(db), actors=[_agent.Agent]) as system:
        ref = await system.spawn(_agent.Agent, "bench-run")
        return await ref.ask(_agent.Run(steps), message_id="run")

anyio.run(main)
"""

CALLS = (
    """
import cProfile, os, signal, sys
prof = cProfile.Profile()
prof.enable()
import anyio, anyio._backends._asyncio, attrs, sqlite3


def count():
    prof.disable()
    prof.create_stats()
    prof.enable()
    return sum(v[1] for v in prof.stats.values())


deps = count()
from actorlog import ActorSystem
from actorlog.stores import SqliteStore
imported = count()
from benchmarks import _agent

db, phase, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])

def at_resume():
    print(deps, imported, count(), flush=True)
"""
    + _RUN
)


#: Part 4's floor: the Python function calls of FLOOR_DEPS (the dependencies imported, one
#: row committed inside ``anyio.run``), counted the same way: after the imports, and in all.
CALLS_FLOOR = "import cProfile\nprof = cProfile.Profile()\nprof.enable()\n" + FLOOR_DEPS.replace(
    "import anyio, anyio._backends._asyncio, attrs\n",
    "import anyio, anyio._backends._asyncio, attrs\nimport sqlite3\n"
    "prof.disable()\nprof.create_stats()\nprof.enable()\n"
    "deps = sum(v[1] for v in prof.stats.values())\n",
).replace(
    "print(*anyio.run(main))\n",
    "anyio.run(main)\nprof.disable()\nprof.create_stats()\n"
    "print(deps, sum(v[1] for v in prof.stats.values()))\n",
)


@attrs.define
class Calls:
    """Python function calls (cProfile's count) of one process, running totals at its
    phases (Part 4)."""

    deps: int  # the dependencies imported (anyio with its asyncio backend, attrs, sqlite3)
    imported: int  # and actorlog with its SQLite store (0 for the floor)
    total: int  # at the first resumed tool call (the floor: its row committed in anyio.run)


def calls_floor(work: Path) -> Calls:
    """Python function calls of CALLS_FLOOR in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", CALLS_FLOOR, str(work / "calls-floor.db")],
        env=child_env(None),
        cwd=str(work),
        capture_output=True,
        text=True,
        check=True,
    )
    deps, total = (int(x) for x in out.stdout.split()[-2:])
    return Calls(deps, 0, total)


def calls_round(pkg: Path | None, steps: int, work: Path, name: str) -> Calls:
    """Python function calls of a fresh process from its start to its first resumed tool
    call, after a run of ``steps`` calls killed at 75 % (Part 4)."""
    db = work / f"calls-{name}.db"
    env = child_env(pkg)
    env["PYTHONPATH"] = os.pathsep.join(
        [*([str(pkg)] if pkg is not None else []), str(REPO_ROOT), env.get("PYTHONPATH", "")]
    )
    cmd = [sys.executable, "-c", CALLS, str(db)]
    killed = subprocess.run([*cmd, "run", str(steps)], env=env, cwd=str(work), check=False)
    if killed.returncode != -9:
        raise RuntimeError(f"the run phase exited {killed.returncode}, not killed")
    out = subprocess.run(
        [*cmd, "resume", str(steps)], env=env, cwd=str(work), capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"the resume phase exited {out.returncode}: {out.stderr[-300:]}")
    deps, imported, total = (int(x) for x in out.stdout.split()[-3:])
    return Calls(deps, imported, total)


#: Part 5's child (``--callgrind``): ``ARGV: db phase steps``. Phase ``run`` is killed like
#: CALLS'; ``deps`` exits once the dependencies are imported, ``import`` once actorlog and
#: its SQLite store are, ``resume`` at the first resumed tool call. No profiler: callgrind
#: counts the instructions, C included (SQLite, unmarshalling, compiling attrs' methods).
RESUME = (
    """
import os, signal, sys
import anyio, anyio._backends._asyncio, attrs, sqlite3
db, phase, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
if phase == "deps":
    os._exit(0)
from actorlog import ActorSystem
from actorlog.stores import SqliteStore
if phase == "import":
    os._exit(0)
from benchmarks import _agent

def at_resume():
    pass
"""
    + _RUN
)

_SUMMARY = re.compile(rb"^(?:summary|totals): (\d+)", re.MULTILINE)


def instructions(cmd: Sequence[str], env: dict[str, str], work: Path, name: str) -> int:
    """Instructions a process executes (``valgrind --tool=callgrind``), all its threads."""
    out = work / f"callgrind-{name}.out"
    subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *cmd],
        env=env,
        cwd=str(work),
        capture_output=True,
        check=False,
    )
    m = _SUMMARY.search(out.read_bytes())
    if m is None:
        raise RuntimeError(f"callgrind wrote no total for {name}")
    return int(m.group(1))


def instructions_round(pkg: Path | None, steps: int, work: Path, name: str) -> Calls:
    """Part 5: instructions to the dependencies imported, to actorlog imported, and to the
    first resumed tool call (after a run of ``steps`` calls killed at 75 %), in three fresh
    processes under callgrind (the same fields as Part 4's ``Calls``)."""
    db = work / f"insn-{name}.db"
    env = child_env(pkg)
    env["PYTHONPATH"] = os.pathsep.join(
        [*([str(pkg)] if pkg is not None else []), str(REPO_ROOT), env.get("PYTHONPATH", "")]
    )
    cmd = [sys.executable, "-c", RESUME, str(db)]
    killed = subprocess.run([*cmd, "run", str(steps)], env=env, cwd=str(work), check=False)
    if killed.returncode != -9:
        raise RuntimeError(f"the run phase exited {killed.returncode}, not killed")
    got = [
        instructions([*cmd, phase, str(steps)], env, work, f"{name}-{phase}")
        for phase in ("deps", "import", "resume")
    ]
    return Calls(*got)


def instructions_floors(work: Path) -> dict[str, int]:
    """Part 5's floors under callgrind: a bare interpreter, FLOOR and FLOOR_DEPS."""
    return {
        label: instructions(
            [sys.executable, "-c", script, str(work / f"insn-floor-{i}.db")],
            child_env(None),
            work,
            f"floor-{i}",
        )
        for i, (label, script) in enumerate(
            (
                ("a bare interpreter (`python -c pass`)", "pass"),
                ("floor: python -c, sqlite3, one row committed", FLOOR),
                ("the dependency floor (one row committed in anyio.run)", FLOOR_DEPS),
            )
        )
    }
