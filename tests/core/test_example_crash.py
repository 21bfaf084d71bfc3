"""The README's main job, as a test: a real worker process SIGKILLed mid-run resumes from
the log without redoing completed tool calls or repeating a booking."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "crash_resume.py"


def test_example_agent_killed_mid_run_resumes_without_repeating(tmp_path: Path) -> None:
    env = dict(os.environ, ACTORLOG_EXAMPLE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SIGKILL after 6 tool executions (exit code -9)" in out.stdout
    assert "recovered trip-42:" in out.stdout
    assert "1 completed steps replayed" in out.stdout
    assert "bookings in the ledger: 3 (booking attempts: 3)" in out.stdout
    # leg 1's tools never ran again after the kill
    second_run = out.stdout.split("run 2:")[1]
    assert "ask_llm('hotels in Lisbon')" not in second_run
    assert (
        "ask_llm('hotels in Porto')" not in second_run
    )  # completed before the kill: served from the log
