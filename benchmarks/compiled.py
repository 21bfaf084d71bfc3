"""The step path compiled with mypyc beside the pure build: instructions and Python calls per
ask (issue 28).

    python -m benchmarks.compiled [--modules M,M,...] [--actors 1,100] [--stores memory,sqlite]
                                  [--asks 200,1200] [--keep DIR] [--no-callgrind]

Copies the importable ``actorlog`` package twice into a scratch directory, compiles the listed
modules of one copy with mypyc (``mypyc``, from mypy, with setuptools in the same environment:
``pip install mypy setuptools``; gcc and the Python headers) after the few source edits mypyc
needs (``EDITS`` below, each with the error it avoids), and measures both builds in child
processes with ``benchmarks.cpu_per_step``'s workload (each ask one step with one
``ctx.call``):

- instructions per ask, which the machine's load does not move: ``valgrind --tool=callgrind``
  over two runs of the same child with ``--asks`` N1 and N2 asks (after the same warm-up),
  the difference of their totals divided by N2 - N1 (start, import and shutdown cancel out),
  with ``PYTHONHASHSEED=0`` (a salted ``hash`` moves them by about 1% between runs);
- Python calls per ask: cProfile's count over one run of N2 asks after a warm-up (system
  start and stop included); a compiled function is C and not counted, what it calls from
  interpreted code is.

A child checks that it imported its own copy, and the compiled one that each listed module is
an extension module. The scratch copies stay with ``--keep DIR``; the compiled copy can then be
used directly (``PYTHONPATH=DIR/mypyc python ...``) to run the tests against it.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import anyio

from ._common import bench_parser

#: The step path's modules that compile and run (issue 28's candidates). Not in it:
#: ``_journal/rows.py`` (its attrs classes with ``attrs.field(default=...)`` fail at import
#: even as interpreted classes: "bool object expected; got attr._make._CountingAttr"),
#: ``stores/memory.py`` (an async generator: "async generators are unimplemented").
MODULES = (
    "_journal/checks.py",
    "_journal/ids.py",
    "_journal/names.py",
    "_journal/frames.py",
    "_journal/codec.py",
    "_journal/records.py",
    "_journal/door.py",
    "_durability/seenids.py",
    "_durability/mailbox.py",
    "_durability/wal.py",
    "_durability/logged.py",
    "_core/step.py",
    "_core/cell.py",
    "_effects/calls.py",
    "_effects/context.py",
    "_effects/ref.py",
)

_ATTR = "from mypy_extensions import mypyc_attr as _mypyc_attr\n"


def _interpreted_attrs_classes(src: str) -> str:
    """Each attrs class stays an interpreted class (its methods are still compiled): mypyc
    builds an attrs class as a native one and fails at import on a field with
    ``attrs.field(default=...)`` ("bool object expected; got attr._make._CountingAttr")."""
    lines = src.split("\n")
    out: list[str] = []
    for i, line in enumerate(lines):
        top = re.match(r"^(\s*)@", line)
        if top and (i == 0 or not lines[i - 1].lstrip().startswith("@")):
            j = i
            while lines[j].lstrip().startswith("@"):
                j += 1
            decorators = "\n".join(lines[i:j])
            if lines[j].lstrip().startswith("class ") and "attrs." in decorators:
                out.append(top.group(1) + "@_mypyc_attr(native_class=False)")
        out.append(line)
    return "\n".join(out)


def _replace(old: str, new: str) -> Callable[[str], str]:
    def edit(src: str) -> str:
        if old not in src:
            raise SystemExit(f"mypyc edit: {old[:60]!r} not found (the source changed)")
        return src.replace(old, new, 1)

    return edit


#: module -> the edits mypyc needs, each with what it avoids. ``_mypyc_attr`` is
#: ``mypy_extensions.mypyc_attr``, imported where used.
EDITS: dict[str, list[Callable[[str], str]]] = {
    "_journal/codec.py": [
        # a list subclass cannot be a native class ("Inheriting from most builtin types is
        # unimplemented")
        _replace("\nclass SetList(", "\n@_mypyc_attr(native_class=False)\nclass SetList("),
        # a module __getattr__ (the lazy ``codec.converter``) is called by mypyc's import
        # before the module's globals exist: a segfault at import. Compiled code reaches
        # the converter through ``_converter()`` only.
        _replace(
            'def __getattr__(name: str) -> Any:\n    if name == "converter":\n'
            "        return _make_converter()\n",
            'def _unused_getattr(name: str) -> Any:\n    if name == "converter":\n'
            "        return _make_converter()\n",
        ),
        # ...and a global not assigned yet is a KeyError in compiled code, not a NameError
        _replace("    except NameError:  # not made yet", "    except (NameError, KeyError):"),
    ],
    "_durability/logged.py": [
        # declarations under ``if TYPE_CHECKING:`` in a class body: "Unsupported statement
        # in class body"; ``Cell`` defines the three methods
        _replace(
            "    if TYPE_CHECKING:\n\n"
            "        def spawn_task(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: "
            "Any) -> None: ...\n\n"
            "        def check_usable(self) -> None: ...\n\n"
            "        def quarantine(self, exc: BaseException, *, status: str = ...) -> None: "
            "...\n",
            "    def spawn_task(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) "
            "-> None:\n        raise NotImplementedError\n\n"
            "    def check_usable(self) -> None:\n        raise NotImplementedError\n\n"
            "    def quarantine(self, exc: BaseException, *, status: str = '') -> None:\n"
            "        raise NotImplementedError\n",
        )
    ],
    "_core/step.py": [
        # a Protocol's ``= ...`` default is evaluated at import: "str object expected; got
        # ellipsis"
        _replace("trigger: str = ...)", "trigger: str = '')")
    ],
    "_durability/wal.py": [
        # _core/readonly.py's _ReadOnlyJournal subclasses it: "interpreted classes cannot
        # inherit from compiled"
        _replace(
            "\nclass Journal:", "\n@_mypyc_attr(allow_interpreted_subclasses=True)\nclass Journal:"
        )
    ],
    "_effects/calls.py": [
        # _effects/indoubt.py's InDoubtCalls subclasses it (as above)
        _replace(
            "\nclass ToolCalls:",
            "\n@_mypyc_attr(allow_interpreted_subclasses=True)\nclass ToolCalls:",
        )
    ],
}


def prepare(root: Path, modules: list[str]) -> tuple[Path, Path]:
    """Two copies of the importable package under ``root`` (``pure``, ``mypyc``); the
    listed modules of the second edited and compiled. Returns the two directories."""
    import actorlog

    # not resolved: a strict editable install is a tree of links to runtime/, stores/, ...
    source = Path(actorlog.__file__).parent
    if any(source.glob("**/*.so")):
        raise SystemExit(f"{source} holds compiled modules already: run from a pure install")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    builds = root / "pure", root / "mypyc"
    for build in builds:
        shutil.rmtree(build, ignore_errors=True)
        build.mkdir(parents=True)
        shutil.copytree(source, build / "actorlog", symlinks=False, ignore=ignore)
    compiled = builds[1] / "actorlog"
    for module in modules:
        path = compiled / module
        src = path.read_text()
        for edit in EDITS.get(module, []):
            src = edit(src)
        src = _interpreted_attrs_classes(src)
        if "@_mypyc_attr(" in src:
            src = src.replace(
                "from __future__ import annotations\n",
                "from __future__ import annotations\n" + _ATTR,
                1,
            )
        path.write_text(src)
    mypyc = Path(sys.executable).with_name("mypyc")
    run = subprocess.run(
        [str(mypyc), *(f"actorlog/{m}" for m in modules)],
        cwd=builds[1],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        noise = ("gcc ", "creating ", "copying ", "building ", "running ")
        errors = [ln for ln in run.stdout.splitlines() if not ln.startswith(noise)]
        raise SystemExit("mypyc failed:\n" + "\n".join(errors[-40:]) + run.stderr[-2000:])
    return builds


def _child(args: argparse.Namespace) -> None:
    """In a build's directory: one run of ``cpu_per_step``'s workload (after a warm-up)."""
    import actorlog
    from actorlog.benchmarks.cpu_per_step import cpu_per_ask

    here = Path.cwd().resolve()
    if not Path(actorlog.__file__).resolve().is_relative_to(here):
        raise SystemExit(f"imported {actorlog.__file__}, not the copy in {here}")
    names = [f"actorlog.{m[:-3].replace('/', '.')}" for m in args.modules.split(",") if m]
    files = [sys.modules[n].__file__ or "" for n in names if n in sys.modules]
    compiled = sum(f.endswith(".so") for f in files)
    anyio.run(cpu_per_ask, args.actors, 200, 1, args.store)
    if args.child == "count":
        anyio.run(cpu_per_ask, args.actors, args.n, 1, args.store)
        print(json.dumps({"compiled": compiled}))
        return
    profile = cProfile.Profile()
    profile.enable()
    anyio.run(cpu_per_ask, args.actors, args.n, 1, args.store)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]  # untyped in typeshed
    calls = sum(v[1] for v in stats.values())
    python = sum(v[1] for k, v in stats.items() if k[0] != "~")
    asks = max(args.n // args.actors, 1) * args.actors
    print(json.dumps({"compiled": compiled, "calls": calls / asks, "python": python / asks}))


def _run_child(
    build: Path, mode: str, actors: int, store: str, n: int, modules: str, callgrind: bool
) -> tuple[dict[str, float], int]:
    cmd = [sys.executable, "-m", "actorlog.benchmarks.compiled", "--child", mode]
    cmd += ["--actors", str(actors), "--store", store, "--n", str(n), "--modules", modules]
    if callgrind:
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd]
    # one hash seed for every child: salted hashes move the instructions of one build by
    # about 1% between runs (dict layouts, the message-id filter's bits)
    env = dict(os.environ, PYTHONPATH=str(build), PYTHONHASHSEED="0")
    run = subprocess.run(cmd, cwd=build, env=env, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise SystemExit(f"child failed in {build}:\n{run.stdout}\n{run.stderr[-3000:]}")
    refs = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
    return json.loads(run.stdout.strip().splitlines()[-1]), int(
        refs.group(1).replace(",", "") if refs else 0
    )


def main() -> None:
    parser = bench_parser(__doc__, writes=False)
    parser.add_argument("--modules", default=",".join(MODULES), help="modules to compile")
    parser.add_argument("--actors", default="1,100", help="concurrent actors, comma-separated")
    parser.add_argument("--stores", default="memory,sqlite", help="memory, sqlite or both")
    parser.add_argument("--asks", default="200,1200", help="N1,N2: asks of the two runs")
    parser.add_argument("--keep", type=Path, default=None, help="build the copies here, keep them")
    parser.add_argument("--no-callgrind", action="store_true", help="calls per ask only")
    parser.add_argument("--child", choices=("count", "profile"), help=argparse.SUPPRESS)
    parser.add_argument("--store", default="memory", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.actors = int(args.actors)
        _child(args)
        return
    modules = [m for m in args.modules.split(",") if m]
    n1, n2 = (int(x) for x in args.asks.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep.resolve() if args.keep else Path(tmp)
        pure, compiled = prepare(root, modules)
        print(f"compiled {len(modules)} modules with mypyc in {compiled}")
        print("| setup | build | instructions per ask | calls per ask (Python functions) |")
        print("|---|---|---:|---:|")
        for store in args.stores.split(","):
            for actors in (int(a) for a in args.actors.split(",")):
                base = 0.0
                for name, build in (("pure", pure), ("mypyc", compiled)):
                    want = len(modules) if name == "mypyc" else 0
                    prof, _ = _run_child(build, "profile", actors, store, n2, args.modules, False)
                    if prof["compiled"] != want:
                        raise SystemExit(f"{name}: {prof['compiled']} compiled, not {want}")
                    per = 0.0
                    if not args.no_callgrind:
                        _, low = _run_child(build, "count", actors, store, n1, args.modules, True)
                        _, high = _run_child(build, "count", actors, store, n2, args.modules, True)
                        per = (high - low) / (n2 - n1)
                    base = base or per
                    change = f" ({per / base - 1:+.0%})" if name == "mypyc" and base else ""
                    print(
                        f"| {actors} actor{'s' if actors > 1 else ''}, {store} | {name} | "
                        f"{f'{per:,.0f}' if per else '-'}{change} | {prof['calls']:.0f} "
                        f"({prof['python']:.0f}) |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
