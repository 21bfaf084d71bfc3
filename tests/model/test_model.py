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
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

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


def run_model(
    machine: type[RuleBasedStateMachine],
    store_kind: str,
    *,
    examples: int,
    steps: int,
    backend: str = "asyncio",
    base_dir: Path | None = None,
    **flags: object,
) -> None:
    """Run ``machine`` (one of this folder's) on a store kind and backend: ``examples``
    (times SOAK, or ACTORLOG_MODEL_EXAMPLES) of up to ``steps`` rules each."""
    attributes: dict[str, object] = {"store_kind": store_kind, "backend": backend, **flags}
    if base_dir is not None:
        attributes["base_dir"] = str(base_dir)
    name = f"{machine.__name__}On{store_kind.title()}{backend.title()}"
    run_state_machine_as_test(
        type(name, (machine,), attributes), settings=_settings(_examples(examples), steps)
    )


@pytest.mark.timeout(600 * SOAK)
def test_model_on_memory_store() -> None:
    run_model(ModelMachine, "memory", examples=25, steps=30)


@pytest.mark.timeout(600 * SOAK)
def test_model_on_sqlite_file(tmp_path: Path) -> None:
    run_model(ModelMachine, "sqlite", examples=6, steps=25, base_dir=tmp_path)


@pytest.mark.timeout(600 * SOAK)
def test_model_on_sqlite_file_on_trio(tmp_path: Path) -> None:
    run_model(ModelMachine, "sqlite", examples=3, steps=25, backend="trio", base_dir=tmp_path)


@pytest.mark.timeout(600 * SOAK)
def test_model_issue24_on_memory_store() -> None:
    """With the rules of issue 24: retries, lifecycle, compaction, class upgrades."""
    run_model(ModelMachine, "memory", examples=10, steps=25, extended=True)


@pytest.mark.timeout(600 * SOAK)
def test_model_issue24_on_sqlite_file(tmp_path: Path) -> None:
    run_model(ModelMachine, "sqlite", examples=6, steps=20, base_dir=tmp_path, extended=True)


# -- issue 25: concurrent effects inside a step (concurrent_machine.py) ---------------------


@pytest.mark.timeout(600 * SOAK)
def test_concurrent_model_on_memory_store() -> None:
    run_model(ConcurrentMachine, "memory", examples=15, steps=12)


@pytest.mark.timeout(600 * SOAK)
def test_concurrent_model_on_memory_store_on_trio() -> None:
    run_model(ConcurrentMachine, "memory", examples=8, steps=12, backend="trio")


@pytest.mark.timeout(600 * SOAK)
def test_concurrent_model_on_sqlite_file(tmp_path: Path) -> None:
    run_model(ConcurrentMachine, "sqlite", examples=6, steps=10, base_dir=tmp_path)


@pytest.mark.timeout(600 * SOAK)
def test_concurrent_model_on_sqlite_file_on_trio(tmp_path: Path) -> None:
    run_model(ConcurrentMachine, "sqlite", examples=4, steps=10, backend="trio", base_dir=tmp_path)
