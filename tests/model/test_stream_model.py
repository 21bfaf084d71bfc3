"""The streaming model (stream_machine.py): MemoryStore on asyncio and trio, a real SQLite
file on asyncio; a crash at every durability boundary (the N-th append, before or after its
commit). ``ACTORLOG_MODEL_EXAMPLES=N`` runs N examples per test; ``ACTORLOG_SOAK=1`` x10."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis.stateful import run_state_machine_as_test

from .stream_machine import StreamMachine
from .test_model import SOAK, _examples, _settings


@pytest.mark.timeout(600 * SOAK)
def test_stream_model_on_memory_store() -> None:
    class OnMemory(StreamMachine):
        store_kind = "memory"

    run_state_machine_as_test(OnMemory, settings=_settings(_examples(20), 12))


@pytest.mark.timeout(600 * SOAK)
def test_stream_model_on_memory_store_on_trio() -> None:
    class OnMemoryTrio(StreamMachine):
        store_kind = "memory"
        backend = "trio"

    run_state_machine_as_test(OnMemoryTrio, settings=_settings(_examples(8), 10))


@pytest.mark.timeout(600 * SOAK)
def test_stream_model_on_sqlite_file(tmp_path: Path) -> None:
    class OnSqlite(StreamMachine):
        store_kind = "sqlite"
        base_dir = str(tmp_path)

    run_state_machine_as_test(OnSqlite, settings=_settings(_examples(6), 10))
