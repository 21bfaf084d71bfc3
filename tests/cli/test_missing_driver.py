"""A PostgreSQL URL where asyncpg is not installed (issue 15): the library and the CLI say
``pip install 'actorlog[postgres]'``, never "internal error ... please report it". Each case
runs in a fresh interpreter whose ``import asyncpg`` is blocked (``sys.modules`` entry None,
set by a ``sitecustomize`` on ``PYTHONPATH``), as on a machine without the extra."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli._support import cli

FIX = "pip install 'actorlog[postgres]'"
URL = "postgresql://someone@localhost:1/agents"


@pytest.fixture
def no_asyncpg(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['asyncpg'] = None\n")
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path}


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_blocker_blocks(no_asyncpg: dict[str, str]) -> None:
    p = _python("import asyncpg", no_asyncpg)
    assert p.returncode != 0 and "ModuleNotFoundError" in p.stderr


@pytest.mark.parametrize(
    "call",
    [
        "from actorlog.stores import open_store; open_store(URL)",
        "import actorlog; actorlog.ActorSystem(store=URL)",
    ],
    ids=["open_store", "ActorSystem"],
)
def test_the_library_says_which_extra_to_install(no_asyncpg: dict[str, str], call: str) -> None:
    p = _python(
        f"""
        import actorlog
        URL = {URL!r}
        try:
            {call}
        except actorlog.StoreURLError as exc:
            print(exc)
        """,
        no_asyncpg,
    )
    assert p.returncode == 0, p.stderr
    assert FIX in p.stdout
    assert "expected sqlite" not in p.stdout  # the URL is fine: only the driver is missing


def test_importing_postgres_store_says_which_extra_to_install(no_asyncpg: dict[str, str]) -> None:
    p = _python(
        """
        try:
            from actorlog.stores import PostgresStore
        except ImportError as exc:
            print(type(exc).__name__, exc.name, exc)
        """,
        no_asyncpg,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("ModuleNotFoundError asyncpg ")
    assert FIX in p.stdout


@pytest.mark.parametrize("command", [["actors"], ["verify"], ["history", "some-actor"]])
def test_the_cli_says_which_extra_to_install(
    no_asyncpg: dict[str, str], command: list[str]
) -> None:
    run = cli(command[0], URL, *command[1:], env=no_asyncpg)
    assert run.code == 2, run.err
    assert FIX in run.err
    assert "internal error" not in run.err and "please report" not in run.err
