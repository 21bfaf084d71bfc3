"""The stateful model test (see machine.py): MemoryStore (more examples) and a real SQLite
file (fewer), on asyncio; the SQLite file on trio too (fewer still: the same machine, the
other backend).

The default is a short run (a few minutes of CI on 2 cores for the whole folder): every CI
run draws fresh examples, so the runs add up. ``ACTORLOG_SOAK=1`` runs x10 the examples
(``ACTORLOG_SOAK_ITERATIONS=N``: xN, as in tests/torture), ``ACTORLOG_MODEL_EXAMPLES=N``
exactly N per test."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from .concurrent_machine import ConcurrentMachine
from .machine import STATS, ModelMachine

#: x10 with ACTORLOG_SOAK=1, xN with ACTORLOG_SOAK_ITERATIONS=N (as tests/_soak.py counts)
SOAK = (
    max(1, int(os.environ.get("ACTORLOG_SOAK_ITERATIONS") or 0))
    if os.environ.get("ACTORLOG_SOAK_ITERATIONS")
    else (10 if os.environ.get("ACTORLOG_SOAK", "") not in ("", "0") else 1)
)


def _examples(default: int) -> int:
    given = os.environ.get("ACTORLOG_MODEL_EXAMPLES")
    return int(given) if given else default * SOAK


@pytest.fixture(autouse=True)
def _report_stats() -> Iterator[None]:
    """Print how often each operation ran (seen with ``-s``; the figures in testing.md)."""
    STATS.clear()
    start = time.monotonic()
    yield
    ops = ", ".join(f"{k} {v}" for k, v in STATS.most_common())
    print(f"\nmodel: {time.monotonic() - start:.0f} s; operations: {ops}")


def _settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        # each example starts an event loop and a system: slow by design
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        derandomize=False,
        print_blob=True,
    )


@pytest.mark.timeout(600 * SOAK)
def test_model_on_memory_store() -> None:
    class OnMemory(ModelMachine):
        store_kind = "memory"

    run_state_machine_as_test(OnMemory, settings=_settings(_examples(25), 30))


@pytest.mark.timeout(600 * SOAK)
def test_model_on_sqlite_file(tmp_path: Path) -> None:
    class OnSqlite(ModelMachine):
        store_kind = "sqlite"
        base_dir = str(tmp_path)

    run_state_machine_as_test(OnSqlite, settings=_settings(_examples(6), 25))


@pytest.mark.timeout(600 * SOAK)
def test_model_on_sqlite_file_on_trio(tmp_path: Path) -> None:
    class OnSqliteTrio(ModelMachine):
        store_kind = "sqlite"
        backend = "trio"
        base_dir = str(tmp_path)

    run_state_machine_as_test(OnSqliteTrio, settings=_settings(_examples(3), 25))


@pytest.mark.timeout(600 * SOAK)
def test_model_issue24_on_memory_store() -> None:
    """With the rules of issue 24: retries, lifecycle, compaction, class upgrades."""

    class Extended(ModelMachine):
        store_kind = "memory"
        extended = True

    run_state_machine_as_test(Extended, settings=_settings(_examples(10), 25))


@pytest.mark.timeout(600 * SOAK)
def test_model_issue24_on_sqlite_file(tmp_path: Path) -> None:
    class ExtendedSqlite(ModelMachine):
        store_kind = "sqlite"
        base_dir = str(tmp_path)
        extended = True

    run_state_machine_as_test(ExtendedSqlite, settings=_settings(_examples(6), 20))


# -- issue 25: concurrent effects inside a step (concurrent_machine.py) ---------------------


@pytest.mark.timeout(600 * SOAK)
def test_concurrent_model_on_memory_store() -> None:
    class OnMemory(ConcurrentMachine):
        store_kind = "memory"

    run_state_machine_as_test(OnMemory, settings=_settings(_examples(15), 12))


@pytest.mark.timeout(600 * SOAK)
def test_concurrent_model_on_memory_store_on_trio() -> None:
    class OnMemoryTrio(ConcurrentMachine):
        store_kind = "memory"
        backend = "trio"

    run_state_machine_as_test(OnMemoryTrio, settings=_settings(_examples(8), 12))


@pytest.mark.timeout(600 * SOAK)
def test_concurrent_model_on_sqlite_file(tmp_path: Path) -> None:
    class OnSqlite(ConcurrentMachine):
        store_kind = "sqlite"
        base_dir = str(tmp_path)

    run_state_machine_as_test(OnSqlite, settings=_settings(_examples(6), 10))


@pytest.mark.timeout(600 * SOAK)
def test_concurrent_model_on_sqlite_file_on_trio(tmp_path: Path) -> None:
    class OnSqliteTrio(ConcurrentMachine):
        store_kind = "sqlite"
        backend = "trio"
        base_dir = str(tmp_path)

    run_state_machine_as_test(OnSqliteTrio, settings=_settings(_examples(4), 10))
