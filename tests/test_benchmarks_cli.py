"""The benchmarks as a user runs them: ``python -m actorlog.benchmarks NAME``, defaults shown
in ``--help``, reports to ``--out DIR`` and never to docs/benchmarks/ unless asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"


def _bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actorlog.benchmarks", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def _docs_state() -> dict[str, float]:
    return {p.name: p.stat().st_mtime for p in DOCS.iterdir()}


def test_the_entry_point_lists_the_benchmarks(tmp_path: Path) -> None:
    run = _bench("--help", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "recovery" in run.stdout and "--quick" in run.stdout
    unknown = _bench("nope", cwd=tmp_path)
    assert unknown.returncode == 2 and "unknown benchmark 'nope'" in unknown.stderr


def test_help_shows_the_defaults(tmp_path: Path) -> None:
    run = _bench("recovery", "--help", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    text = " ".join(run.stdout.split())
    assert "(default: 25000)" in text and "--out DIR" in text and "--write-docs" in text
    assert "--quick" in text


def test_a_quick_run_writes_to_out_and_leaves_docs_alone(tmp_path: Path) -> None:
    before = _docs_state()
    run = _bench("raw_sqlite", "--quick", "--seconds", "0.05", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    report = tmp_path / "benchmark-results" / "raw_sqlite.md"  # the default --out
    assert report.is_file() and "Raw SQLite commit rate" in report.read_text()
    other = tmp_path / "elsewhere"
    run = _bench("raw_sqlite", "--quick", "--seconds", "0.05", "--out", str(other), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (other / "raw_sqlite.md").is_file()
    assert _docs_state() == before


def test_the_parallel_benchmark_in_a_tiny_mode(tmp_path: Path) -> None:
    """Both parts: a step killed with SIGKILL mid-way and resumed in a fresh process, and
    the pydantic-ai agent with and without the integration (figures are not checked)."""
    args = ("parallel", "--quick", "--calls", "2", "--delay", "0.005", "--kill-at", "2")
    run = subprocess.run(  # four worker processes and pydantic-ai's import: a longer timeout
        [sys.executable, "-m", "actorlog.benchmarks", *args, "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    report = (tmp_path / "out" / "parallel.md").read_text()
    assert "2 calls of 5.00 ms, sequential" in report and "calls run again" in report
    assert "DurableAgent (parallel)" in report


def test_the_step_lookup_benchmark_in_quick_mode(tmp_path: Path) -> None:
    """The command FORMAT.md [F24] cites for format 5's step scan runs, both formats."""
    run = _bench("step_lookup", "--quick", "--no-write", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    rows = [line.split() for line in run.stdout.splitlines() if " format " in line]
    assert sorted((r[4], r[5]) for r in rows) == [
        ("4", "2,000"),
        ("4", "4"),
        ("5", "2,000"),
        ("5", "4"),
    ], run.stdout
