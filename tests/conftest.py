"""Shared fixtures: core tests run on asyncio and trio (memory store and a real SQLite file),
and on asyncio with a real PostgreSQL server (``ACTORLOG_TEST_POSTGRES_URL`` or
``DATABASE_URL``; ``.ci/run`` starts one; without one the postgres cases skip, except under
``CI``, where they fail: ``tests/_pg.py``)."""

from __future__ import annotations

import collections
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from actorlog.store import Store
from actorlog.stores import MemoryStore, SqliteStore

from tests import _pg, _soak
from tests._owner import OwnerProcess
from tests._pgserver import CrashableServer

StoreFactory = Callable[[], Store]


@pytest.fixture(
    params=[
        pytest.param(("asyncio", "memory"), id="asyncio-memory"),
        pytest.param(("trio", "memory"), id="trio-memory"),
        pytest.param(("asyncio", "sqlite"), id="asyncio-sqlite"),
        pytest.param(("trio", "sqlite"), id="trio-sqlite"),
        pytest.param(("asyncio", "postgres"), id="asyncio-postgres"),
    ]
)
def backend_and_store(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]  # pytest params are untyped


@pytest.fixture
def anyio_backend(backend_and_store: tuple[str, str]) -> str:
    return backend_and_store[0]


@pytest.fixture
async def make_store(
    backend_and_store: tuple[str, str], tmp_path: Path
) -> AsyncIterator[StoreFactory]:
    """A factory returning a store over the same data each call (a fresh object for SQLite
    and PostgreSQL, the same object for memory), so a test can 'restart' the system."""
    kind = backend_and_store[1]
    if kind == "memory":
        mem = MemoryStore()
        yield lambda: mem
    elif kind == "postgres":
        url = _pg.postgres_url("the runtime's postgres cases")
        from actorlog.stores import PostgresStore  # needs asyncpg: only when used

        schema = _pg.new_schema("rt")  # a fresh, isolated store per test
        yield lambda: PostgresStore(url, schema=schema)
        await _pg.drop_schemas(url, schema)
    else:
        path = tmp_path / "agents.db"
        yield lambda: SqliteStore(path)


# -- one session over pytest-xdist workers (scripts/test.sh runs ``-n 2``) -------------------
# The torture suite's base seed is drawn once, here, before the workers start (they inherit it
# through the environment: one seed replays the whole run), and the figures each worker's
# torture tests counted are added up for the one summary line.

_FIGURES_KEY = "actorlog_torture_figures"
_WORKERS_FIGURES: collections.Counter[str] = collections.Counter()


@pytest.fixture
def own_server() -> Iterator[CrashableServer]:
    """A PostgreSQL server of the test's own (``tests/_pgserver.py``), durable, which it may
    crash, stop, damage and start again; destroyed at the end."""
    srv = CrashableServer()
    try:
        srv.start()
        yield srv
    finally:
        srv.destroy()


@pytest.fixture
def owner_processes() -> Iterator[Callable[..., OwnerProcess]]:
    """``start(MODULE, *ARGS)``: a runtime in another process (``tests/_owner.py``), for
    the tests of a store several runtimes share; every one started is reaped at the end."""
    started: list[OwnerProcess] = []

    def start(module: str, *args: object) -> OwnerProcess:
        started.append(OwnerProcess(module, *args))
        return started[-1]

    yield start
    for p in started:
        p.close()


def _local_figures() -> collections.Counter[str]:
    """This process's torture figures (none if no torture test was collected here)."""
    module = sys.modules.get("tests.torture.conftest")
    return collections.Counter(getattr(module, "FIGURES", {}))


def pytest_configure(config: pytest.Config) -> None:
    _soak.base_seed()


def pytest_report_header() -> list[str]:
    seed = _soak.base_seed()
    return [
        f"actorlog torture: base seed {seed} (replay with {_soak.SEED_VAR}={seed}),"
        f" soak factor {_soak.soak_factor()}"
    ]


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the figures to the controller
        workeroutput[_FIGURES_KEY] = dict(_local_figures())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """(xdist, in the controller) a worker finished: add up its figures."""
    _WORKERS_FIGURES.update(getattr(node, "workeroutput", {}).get(_FIGURES_KEY, {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    figures = _local_figures() + _WORKERS_FIGURES
    if figures:
        line = ", ".join(f"{k} {v}" for k, v in sorted(figures.items()))
        seed = _soak.base_seed()
        terminalreporter.write_line(f"actorlog torture figures (seed {seed}): {line}")
