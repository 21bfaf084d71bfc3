"""examples/openai_agents_crash_resume.py, as a test: SIGKILLed after its first booking,
the run resumes without asking the model again for answered calls or repeating a booking."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agents")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "openai_agents_crash_resume.py"


def test_openai_agents_example_resumes_after_sigkill(tmp_path: Path) -> None:
    env = dict(os.environ, ACTORLOG_EXAMPLE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=230
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "exit code -9" in out.stdout
    first, second = out.stdout.split("run 2:")
    assert "[tool ran] book(" in first
    assert "recovered trip-42:" in second and "1 call(s) in doubt" in second
    assert "search(" not in second  # completed reads came from the log
    for done in ("Route 0", "Plan a1", "Plan a2", "Plan a3"):
        assert f"[model] call {done}\n" in first
        assert f"[model] call {done}\n" not in second  # answered calls came from the log
    assert "answered by: planner" in second
    assert "bookings in the ledger: 2" in out.stdout
    assert "OK:" in out.stdout
