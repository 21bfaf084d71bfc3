"""The streaming model (stream_machine.py): MemoryStore on asyncio and trio, a real SQLite
file on asyncio; a crash at every durability boundary (the N-th append, before or after its
commit). ``ACTORLOG_MODEL_EXAMPLES=N`` runs N examples per test; ``ACTORLOG_SOAK=1`` x10."""

from __future__ import annotations

from pathlib import Path

import pytest

from .stream_machine import StreamMachine
from .test_model import SOAK, run_model


@pytest.mark.timeout(600 * SOAK)
def test_stream_model_on_memory_store() -> None:
    run_model(StreamMachine, "memory", examples=20, steps=12)


@pytest.mark.timeout(600 * SOAK)
def test_stream_model_on_memory_store_on_trio() -> None:
    run_model(StreamMachine, "memory", examples=8, steps=10, backend="trio")


@pytest.mark.timeout(600 * SOAK)
def test_stream_model_on_sqlite_file(tmp_path: Path) -> None:
    run_model(StreamMachine, "sqlite", examples=6, steps=10, base_dir=tmp_path)
