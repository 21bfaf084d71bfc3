"""examples/pydantic_ai_agent.py, as a test: SIGKILLed after its first booking, the agent
resumes without asking the model again for answered requests or repeating a booking."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pydantic_ai_agent.py"


def test_pydantic_ai_example_resumes_after_sigkill(tmp_path: Path) -> None:
    env = dict(os.environ, ACTORLOG_EXAMPLE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "exit code -9" in out.stdout
    second = out.stdout.split("run 2:")[1]
    assert "recovered trip-42:" in second
    assert "search(" not in second  # completed reads came from the log
    assert "[model] request 1\n" not in second and "[model] request 2\n" not in second
    assert "bookings in the ledger: 2" in out.stdout
    assert "OK:" in out.stdout
