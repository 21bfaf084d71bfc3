"""actorlog imports only what it declares: its run-time dependencies (pyproject's
``dependencies``) and, for a module behind an extra (``actorlog[web]``, ``[postgres]``, ...),
that extra's. A module that is merely installed here (by the test extras, or as a dependency
that an older release of a dependency had: sniffio came with anyio once) would pass every other
test and fail ``import actorlog`` on a user's fresh install.

Each check runs in a fresh interpreter whose import system refuses every top-level module that
is neither in the standard library nor in the allowed distributions (with their own
requirements, recursively): an optional import (``try: import x``) sees ``ImportError`` as it
would where ``x`` is not installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: module-name prefixes that need an extra, and which
EXTRAS = {
    "actorlog.integrations.pydantic_ai": "pydantic-ai",
    "actorlog.integrations._pai_": "pydantic-ai",
    "actorlog.integrations.openai_agents": "openai-agents",
    "actorlog.integrations._openai_models": "openai-agents",
    "actorlog.web": "web",
    "actorlog.stores.postgres": "postgres",
    "actorlog.testing._kit": "testing",
}

_GUARD = r'''
import importlib, importlib.metadata as md, re, sys

def _key(name):
    return re.sub(r"[-_.]+", "-", name).lower()

def allowed(extras):
    roots = [("actorlog", e) for e in [None, *extras]]
    dists, todo = set(), roots
    while todo:
        name, extra = todo.pop()
        if (_key(name), extra) in dists:
            continue
        dists.add((_key(name), extra))
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for req in reqs:
            marker = req.partition(";")[2]
            if "extra ==" in marker and f'extra == "{extra}"' not in marker:
                continue
            name = re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0]
            asked = re.match(r"[^\[;]*\[([^\]]*)\]", req)  # name[extra1,extra2]
            for wanted in [None, *(asked.group(1).split(",") if asked else [])]:
                todo.append((name, wanted and wanted.strip()))
    names = {d for d, _ in dists}
    return {m for m, owners in md.packages_distributions().items()
            if any(_key(o) in names for o in owners)} | set(sys.stdlib_module_names)

ALLOWED = allowed(EXTRAS_WANTED)
REFUSED = []
import importlib.machinery, os, sysconfig
STDLIB = tuple(os.path.realpath(sysconfig.get_path(k)) + os.sep for k in ("stdlib", "platstdlib"))

def in_stdlib(top):
    """A private module of the standard library (``_sysconfigdata_...``), not a package."""
    spec = importlib.machinery.PathFinder.find_spec(top)
    origin = os.path.realpath(spec.origin) if spec and spec.origin else ""
    return origin.startswith(STDLIB) and "site-packages" not in origin

class Guard:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in ALLOWED or top in sys.modules or top == "actorlog" or in_stdlib(top):
            return None
        REFUSED.append(name)
        raise ModuleNotFoundError(f"not a declared dependency: {name}", name=name)

sys.meta_path.insert(0, Guard())
'''


def _run(extras: list[str], body: str, tmp_path: Path) -> str:
    script = f"EXTRAS_WANTED = {extras!r}\n" + _GUARD + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _modules() -> list[str]:
    """Every module of the package, from each package root (``actorlog.stores`` lives in
    its own folder, which an editable install does not put under ``actorlog.__path__``)."""
    import pkgutil

    import actorlog
    import actorlog.stores

    names = {"actorlog", "actorlog.stores"}
    for root in (actorlog, actorlog.stores):
        names.update(m.name for m in pkgutil.walk_packages(root.__path__, root.__name__ + "."))
    return sorted(
        n for n in names if not n.endswith("__main__") and not n.startswith("actorlog.benchmarks")
    )


def _extra(module: str) -> str | None:
    return next((e for p, e in EXTRAS.items() if module.startswith(p)), None)


def test_every_core_module_imports_with_the_declared_dependencies_alone(tmp_path: Path) -> None:
    core = [m for m in _modules() if _extra(m) is None]
    assert {"actorlog._durability.mailbox", "actorlog.stores.sqlite", "actorlog.cli"} <= set(core)
    out = _run(
        [],
        f"""
        for name in {core!r}:
            importlib.import_module(name)
        print("refused", sorted(set(REFUSED)))
        """,
        tmp_path,
    )
    assert "refused" in out


@pytest.mark.parametrize("extra", sorted(set(EXTRAS.values())))
def test_a_module_behind_an_extra_imports_with_that_extra(extra: str, tmp_path: Path) -> None:
    mods = [m for m in _modules() if _extra(m) == extra]
    assert mods
    _run(
        [extra],
        f"""
        for name in {mods!r}:
            importlib.import_module(name)
        """,
        tmp_path,
    )


def test_an_agent_runs_and_resumes_on_sqlite_with_the_declared_dependencies_alone(
    tmp_path: Path,
) -> None:
    """The main job (spawn, ask with a tool call, a restart that resumes, the operator
    commands reading the file) on asyncio, with nothing imported beyond the dependencies."""
    out = _run(
        [],
        """
        import anyio, attrs
        from actorlog import Actor, ActorSystem, Context, message, tool
        from actorlog.stores import SqliteStore
        from actorlog.cli import main as cli

        @message(name="deps.Add")
        @attrs.frozen
        class Add:
            n: int

        @attrs.define
        class Total:
            total: int = 0

        @tool(effect="write")
        async def charge(n: int) -> int:
            return n

        class Adder(Actor[Total], name="deps.Adder"):
            async def receive(self, ctx: Context, msg: Add) -> int:
                self.state.total += await ctx.call(charge, msg.n)
                return self.state.total

        async def main() -> None:
            for i in (1, 2):
                async with ActorSystem(SqliteStore("a.db"), actors=[Adder]) as system:
                    ref = await system.spawn(Adder, "adder")
                    print("total", await ref.ask(Add(i), message_id=f"m{i}"))

        anyio.run(main)
        for argv in (["verify", "a.db"], ["history", "a.db", "adder"]):
            try:
                cli(argv)
            except SystemExit as exc:
                assert exc.code in (0, None), (argv, exc.code)
        print("refused", sorted(set(REFUSED)))
        """,
        tmp_path,
    )
    assert "total 1" in out and "total 3" in out, out
