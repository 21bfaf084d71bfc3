"""Shared helpers: the command line (``--out``, ``--write-docs``, ``--quick``), machine
description, Markdown tables, and writing reports."""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import math
import os
import platform
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = [
    "DEFAULT_OUT",
    "DOCS_DIR",
    "REPO_ROOT",
    "Table",
    "bench_parser",
    "configure_output",
    "output_dir",
    "quick",
    "command_line",
    "filesystem_of",
    "loadavg",
    "fmt_bytes",
    "fmt_num",
    "machine_info",
    "machine_markdown",
    "percentile",
    "plot_lines",
    "scratch_dir",
    "write_report",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
#: the committed reports (written only with ``--write-docs``, from a repository checkout)
DOCS_DIR = REPO_ROOT / "docs" / "benchmarks"
#: where reports go by default: relative to the current directory, never docs/
DEFAULT_OUT = Path("benchmark-results")

_output: Path | None = None


def bench_parser(
    doc: str | None, *, quick_help: str | None = None, writes: bool = True
) -> argparse.ArgumentParser:
    """An argument parser whose ``--help`` shows every default; with ``writes``, the report
    options (``--out DIR``, ``--write-docs``); with ``quick_help``, ``--quick``."""
    parser = argparse.ArgumentParser(
        description=(doc or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    if quick_help:
        parser.add_argument("--quick", action="store_true", help=f"a short run: {quick_help}")
    if writes:
        group = parser.add_argument_group("report")
        group.add_argument(
            "--out",
            metavar="DIR",
            type=Path,
            default=DEFAULT_OUT,
            help="directory for the Markdown report and plots (created if missing)",
        )
        group.add_argument(
            "--write-docs",
            action="store_true",
            help="write the committed report in docs/benchmarks/ of this repository checkout "
            "instead of --out (maintainers)",
        )
    return parser


def quick(args: argparse.Namespace, parser: argparse.ArgumentParser, **values: object) -> None:
    """With ``--quick``, use ``values`` for the options the user left at their defaults."""
    if not getattr(args, "quick", False):
        return
    for name, value in values.items():
        if getattr(args, name) == parser.get_default(name):
            setattr(args, name, value)


def configure_output(args: argparse.Namespace) -> Path:
    """Choose where this run's report goes (``--out``, or docs/benchmarks/ with
    ``--write-docs``); exits with a message if ``--write-docs`` has no checkout to write to."""
    global _output
    if getattr(args, "write_docs", False):
        if not (REPO_ROOT / "pyproject.toml").is_file():
            raise SystemExit(
                "--write-docs writes docs/benchmarks/ of a repository checkout; this is an "
                f"installed copy ({REPO_ROOT}). Use --out DIR."
            )
        _output = DOCS_DIR
    else:
        _output = Path(getattr(args, "out", DEFAULT_OUT)).resolve()
    return _output


def output_dir() -> Path:
    """Where reports and plots go (:func:`configure_output`; default ``./benchmark-results``)."""
    return _output if _output is not None else DEFAULT_OUT.resolve()


#: Distributions whose versions every report lists (the ones missing are shown as such).
PACKAGES = (
    "actorlog",
    "anyio",
    "trio",
    "attrs",
    "cattrs",
    "dbos",
    "sqlalchemy",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _memory() -> str:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    kib = int(line.split()[1])
                    return fmt_bytes(kib * 1024)
    except (OSError, ValueError):
        pass
    return "unknown"


def filesystem_of(path: str | os.PathLike[str]) -> str:
    """The filesystem type holding ``path`` (``ext4``, ``tmpfs``, ...): fsync cost depends on it."""
    target = os.path.realpath(path)
    best, fstype = "", "unknown"
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mount = parts[1]
                inside = target == mount or target.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) > len(best):
                    best, fstype = mount, parts[2]
    except OSError:
        pass
    return fstype


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = out.stdout.strip() or "unknown"
    return commit + (" (dirty)" if dirty.stdout.strip() else "")


def loadavg() -> str:
    """Other work on the machine skews every figure: say how busy it was."""
    try:
        with open("/proc/loadavg", encoding="utf-8") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str]:
    versions: dict[str, str] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def machine_info(scratch: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """What a reader needs to judge a figure: CPU, cores, memory, OS, Python, SQLite, disk."""
    scratch_path = os.fspath(scratch) if scratch is not None else tempfile.gettempdir()
    info = {
        "CPU": _cpu_model(),
        "cores (logical)": str(os.cpu_count() or "unknown"),
        "memory": _memory(),
        "OS": f"{platform.system()} {platform.release()}",
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "SQLite (sqlite3 module)": sqlite3.sqlite_version,
        "scratch filesystem": f"{filesystem_of(scratch_path)} ({scratch_path})",
        "git commit": _git_commit(),
        "date (UTC)": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M"),
        "load average (1, 5, 15 min) at start": loadavg(),
    }
    for name, version in package_versions().items():
        info[name] = version
    return info


def machine_markdown(info: dict[str, str]) -> str:
    return Table(["", ""], [[k, v] for k, v in info.items()]).markdown(header=("machine", "value"))


def command_line() -> str:
    """The exact command that produced this run, as a user would type it."""
    argv = list(sys.argv)
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        name = spec.name.removesuffix(".__main__")
        return shlex.join(["python", "-m", name, *argv[1:]])
    return shlex.join(["python", *argv])


class Table:
    """A table of strings (or numbers, formatted with :func:`fmt_num`)."""

    def __init__(self, headers: Sequence[str], rows: Sequence[Sequence[object]] = ()) -> None:
        self.headers = list(headers)
        self.rows: list[list[str]] = []
        for row in rows:
            self.add(*row)

    def add(self, *cells: object) -> None:
        self.rows.append([c if isinstance(c, str) else fmt_num(c) for c in cells])

    def markdown(self, header: Sequence[str] | None = None) -> str:
        head = list(header) if header is not None else self.headers
        numeric = [
            all(_looks_numeric(r[i]) for r in self.rows if i < len(r)) and bool(self.rows)
            for i in range(len(head))
        ]
        lines = ["| " + " | ".join(head) + " |"]
        lines.append("|" + "|".join("---:" if n else "---" for n in numeric) + "|")
        for row in self.rows:
            lines.append("| " + " | ".join(row) + " |")
        return "\n".join(lines)

    def text(self) -> str:
        widths = [len(h) for h in self.headers]
        for row in self.rows:
            for i, cell in enumerate(row):
                widths[i] = max(widths[i], len(cell))
        out = ["  ".join(h.ljust(w) for h, w in zip(self.headers, widths, strict=False))]
        out.append("  ".join("-" * w for w in widths))
        for row in self.rows:
            out.append(
                "  ".join(
                    c.rjust(w) if _looks_numeric(c) else c.ljust(w)
                    for c, w in zip(row, widths, strict=False)
                )
            )
        return "\n".join(out)


def _looks_numeric(cell: str) -> bool:
    s = cell.replace(",", "").replace("x", "").replace("%", "").strip()
    for unit in (" KiB", " MiB", " GiB", " B", " ms", " µs", " s"):
        s = s.removesuffix(unit)
    if s in ("", "-", "n/a"):
        return cell.strip() in ("-", "n/a")
    try:
        float(s)
    except ValueError:
        return False
    return True


def fmt_num(value: object) -> str:
    """Numbers with thousands separators and about three significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return "n/a"
        a = abs(value)
        if a >= 1000:
            return f"{value:,.0f}"
        if a >= 100:
            return f"{value:.0f}"
        if a >= 10:
            return f"{value:.1f}"
        if a >= 1:
            return f"{value:.2f}"
        if a == 0:
            return "0"
        return f"{value:.3g}"
    return str(value)


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by linear interpolation; NaN for no values."""
    if not values:
        return math.nan
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo = math.floor(k)
    hi = math.ceil(k)
    if lo == hi:
        return s[lo]
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


@contextlib.contextmanager
def scratch_dir(parent: str | None = None, keep: bool = False) -> Iterator[Path]:
    """A fresh directory for database files, removed afterwards unless ``keep``."""
    path = Path(tempfile.mkdtemp(prefix="actorlog-bench-", dir=parent))
    try:
        yield path
    finally:
        if keep:
            print(f"(kept scratch files in {path})")
        else:
            shutil.rmtree(path, ignore_errors=True)


def write_report(
    name: str,
    title: str,
    body: str,
    *,
    info: dict[str, str],
    command: str | None = None,
    out_dir: Path | None = None,
) -> Path:
    """Write ``<name>.md`` in :func:`output_dir` (or ``out_dir``): title, command, body
    (tables), machine."""
    out = (out_dir or output_dir()) / f"{name}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = command or command_line()
    text = (
        f"# {title}\n\n"
        f"Produced by:\n\n```\n{cmd}\n```\n\n"
        f"{body.strip()}\n\n"
        f"## Machine\n\n{machine_markdown(info)}\n"
    )
    out.write_text(text, encoding="utf-8")
    return out


def plot_lines(
    out: Path,
    title: str,
    xlabel: str,
    ylabel: str,
    series: dict[str, Sequence[tuple[float, float]]],
    *,
    logx: bool = False,
    logy: bool = False,
    secondary: dict[str, Sequence[tuple[float, float]]] | None = None,
    secondary_label: str = "",
    note: str = "",
) -> Path | None:
    """A line plot as PNG (matplotlib, if installed; else None and a message)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no plot; pip install 'actorlog[bench]')")
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    for name, points in series.items():
        pts = sorted(points)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    if logx:
        if any(p[0] <= 0 for pts in series.values() for p in pts):
            ax.set_xscale("symlog", linthresh=1)
        else:
            ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if secondary:
        ax2 = ax.twinx()
        for name, points in secondary.items():
            pts = sorted(points)
            ax2.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker="s",
                linestyle="--",
                label=name,
                color="gray",
            )
        ax2.set_ylabel(secondary_label)
        ax2.set_ylim(bottom=0)
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, loc="best", fontsize="small")
    if note:
        fig.text(0.01, 0.01, note, fontsize="x-small", color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out
