"""docs/tutorial.md, run as a reader would: examples/tutorial.py (the page shows that very
file, as tests/test_docs_check.py checks) is SIGKILLed mid-run with CRASH=1, then run again,
then inspected with the CLI."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tutorial.py"
SCRIPT = Path(sys.executable).parent / "actorlog"


def _run(cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "tutorial.py"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def test_the_tutorial_crashes_resumes_and_shows_its_history(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "tutorial.py")
    first = _run(tmp_path, CRASH="1")
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert "killed (SIGKILL) while sending" in first.stdout
    assert "q-1:" not in first.stdout
    second = _run(tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stderr == ""  # no warning: the classes and tools have stable names
    lines = second.stdout.splitlines()
    # the e-mail in doubt is sent again with the same key; the answered question is not re-run
    sent = re.search(r"send_email\('ops@example.com'\) key=(run-42:[0-9a-f]{16}:7:1)", first.stdout)
    assert sent, first.stdout
    assert lines[0].endswith(f"send_email('ops@example.com') key={sent[1]}")
    assert "search('hotels in Lisbon')" not in second.stdout
    assert [x.split(":")[0] for x in lines if x.startswith("q-")] == ["q-0", "q-1", "q-2"]
    hist = subprocess.run(
        [str(SCRIPT), "history", "tutorial.db", "run-42"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert hist.returncode == 0, hist.stderr
    assert "[recovered]" in hist.stdout and "attempt 2" in hist.stdout
