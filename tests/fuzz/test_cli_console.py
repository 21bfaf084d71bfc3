"""The argument fuzz over the operator's surface (issue 24): every ``actorlog`` command
(through its ``main(argv)``, in this process) and every console form and page (Starlette's
TestClient), each argument or field given each hostile string (empty, 100 kB, NUL, lone
surrogates, inf, nan, -0.0, 1e300, a 101-digit number, dates at the ends of the calendar,
2,000-level nested JSON, an option where a value goes).

A command ends with exit 0, 1 or 2 and one line on stderr, never an internal error or a
traceback; a console request answers without a 500 and without a traceback. What fails stores
nothing (every row of the SQLite file compared before and after), no file appears where none
was asked for, and afterwards ``verify``, ``actors``, ``timers`` and ``history`` work.
Known defects: :data:`KNOWN_HOLES` (strict, as in test_arguments.py).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import anyio
import pytest
from actorlog.cli._main import main

from . import _world
from .test_arguments import FULL, Findings

#: ``actorlog COMMAND:argument`` or ``console METHOD /path:field`` -> the item of issue 24
#: (or NEW-n of test_arguments.NEW_DEFECTS). Each must still be found (strict, with every
#: value: ACTORLOG_FUZZ_ALL=1).
KNOWN_HOLES: dict[str, str] = {}

#: hostile strings, by name
STRINGS: dict[str, str] = {
    "empty": "",
    "big": "x" * 100_000,
    "nul": "a\x00b",
    "surrogate": "bad \udcff",
    "inf": "inf",
    "nan": "nan",
    "-0.0": "-0.0",
    "1e300": "1e300",
    "huge": "9" * 101,
    "-1": "-1",
    "0": "0",
    "dt_max": "9999-12-31T23:59:59",
    "dt_min": "0001-01-01T00:00:00",
    "deep_json": "[" * 2000 + "]" * 2000,
    "deep_obj": '{"k":' * 2000 + "1" + "}" * 2000,
    "option": "--json",
    "spaces": "  ",
}

#: the strings tried by default (all with ACTORLOG_FUZZ_ALL=1)
CORE = ["empty", "big", "nul", "surrogate", "nan", "huge", "deep_json"]


def strings() -> dict[str, str]:
    return STRINGS if FULL else {k: STRINGS[k] for k in CORE}


#: each command's arguments with a valid value (``{path}``: the store, ``{tmp}``: a
#: directory for outputs); each is replaced by each hostile string in turn
COMMANDS: dict[str, list[tuple[str, str]]] = {
    "actors": [("store", "{path}")],
    "history": [("store", "{path}"), ("actor", "alpha"), ("--since", "1")],
    "history --html": [("store", "{path}"), ("actor", "alpha"), ("--html", "{tmp}/h.html")],
    "show": [("store", "{path}"), ("actor", "alpha"), ("seq", "2")],
    "verify": [("store", "{path}"), ("actor", "alpha")],
    "resolve": [("store", "{path}"), ("actor", "alpha"), ("intent_seq", "2"), ("--fail", "no")],
    "resolve --result": [
        ("store", "{path}"),
        ("actor", "alpha"),
        ("intent_seq", "2"),
        ("--result", '"x"'),
        ("--reason", "why"),
        ("--by", "me"),
    ],
    "fork": [("store", "{path}"), ("actor", "alpha"), ("--at", "2"), ("--as", "forked")],
    "compact": [("store", "{path}"), ("--actor", "alpha"), ("--retention", "30d")],
    "leases": [("store", "{path}")],
    "timers": [("store", "{path}"), ("--actor", "beta")],
    "replay-check": [
        ("store", "{path}"),
        ("--actors", "tests.fuzz._world:Fuzzer"),
        ("--actor", "alpha"),
    ],
    "restart": [("store", "{path}"), ("actor", "alpha"), ("--reason", "why")],
    "cancel": [("store", "{path}"), ("actor", "alpha"), ("--reason", "why"), ("--by", "me")],
    "terminate": [("store", "{path}"), ("actor", "nobody"), ("--reason", "why")],
    "delete": [("store", "{path}"), ("actor", "nobody"), ("--reason", "why")],
    "export": [("store", "{path}"), ("actor", "alpha"), ("-o", "{tmp}/e.jsonl")],
}


def _argv(command: str, args: list[tuple[str, str]]) -> list[str]:
    argv = [command.split(" ")[0]]
    for name, value in args:
        argv += [value] if not name.startswith("-") else [name, value]
    if command == "fork":
        argv.append("--yes")
    return argv


@pytest.fixture(scope="module")
def template() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="actorlog-fuzz-cli-") as d:
        path = os.path.join(d, "template.db")
        anyio.run(_world.build_store, path, backend="asyncio")
        yield path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run ``actorlog`` in this process. stderr takes anything (a real one writes lone
    surrogates with backslashreplace); stdout is strict UTF-8, as a real one is."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:  # argparse refusing the command line: exit 2
        code = exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:
        return -1, f"{type(exc).__name__}: {exc}"
    return code, err.getvalue()


def operator_commands_work(path: str, capsys: pytest.CaptureFixture[str]) -> str | None:
    """``verify`` (clean), ``actors``, ``timers`` and every ``history``: exit 0."""
    for argv in (["verify", path], ["actors", path], ["timers", path]):
        code, err = _run(argv, capsys)
        if code != 0:
            return f"{' '.join(argv[:1])} afterwards: exit {code}: {err[-300:]}"

    async def ids() -> list[str]:
        from actorlog import ops

        async with ops.opened(f"sqlite:///{path}") as store:
            return [a.actor_id for a in await ops.list_actors(store)]

    for aid in anyio.run(ids, backend="asyncio"):
        code, err = _run(["history", path, aid], capsys)
        if code != 0:
            return f"history {aid} afterwards: exit {code}: {err[-300:]}"
    return None


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_cli_refuses_hostile_arguments(
    command: str,
    template: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``actorlog COMMAND`` with each argument hostile: exit 0/1/2 with a one-line error,
    no internal error; a failed command stores nothing and leaves no file behind."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    path = _world.fresh_copy(template, str(tmp_path))
    f = Findings(f"actorlog {command}")
    args = [(n, v.format(path=path, tmp=work)) for n, v in COMMANDS[command]]
    for i, (name, _) in enumerate(args):
        for value_name, value in strings().items():
            hostile = list(args)
            hostile[i] = (name, value)
            before = _world.dump(path)
            files = sorted(os.listdir(work))
            code, err = _run(_argv(command, hostile), capsys)
            if code not in (0, 1, 2) or re.search(r"internal error|Traceback", err):
                f.add(name, value_name, f"exit {code}: {err.strip()[-300:]}")
            if code != 0:
                changed = _world.diff(before, _world.dump(path))
                if changed:
                    f.add(name, value_name, f"exit {code} but stored: {changed}")
                new = sorted(set(os.listdir(work)) - set(files))
                if new:
                    f.add(name, value_name, f"exit {code} but created {new}")
    broken = operator_commands_work(path, capsys)
    if broken:
        f.add("*", "*", broken)
    f.check(KNOWN_HOLES)


# -- the console -------------------------------------------------------------------------------

#: each form (POST) or page (GET) with its fields and valid values
FORMS: dict[str, dict[str, str]] = {
    "POST /resolve": {
        "id": "alpha",
        "intent_seq": "2",
        "action": "result",
        "value": '"x"',
        "by": "me",
        "reason": "why",
    },
    "POST /resolve fail": {"id": "alpha", "intent_seq": "2", "action": "fail", "message": "no"},
    "POST /fork": {"id": "alpha", "new_id": "forked", "at": "2", "seen": "0", "by": "me"},
    "POST /cancel": {"id": "alpha", "by": "me", "reason": "why"},
    "POST /terminate": {"id": "nobody", "by": "me", "reason": "why"},
    "POST /delete": {"id": "nobody", "confirm": "yes", "by": "me", "reason": "why"},
    "GET /": {"status": "idle", "class": "fuzz.fuzzer", "q": "a", "sort": "id", "offset": "0"},
    "GET /actor": {"id": "alpha"},
    "GET /entry": {"id": "alpha", "seq": "2"},
    "GET /fork": {"id": "alpha", "at": "2"},
    "GET /delete": {"id": "alpha"},
    "GET /deleted": {"notice": "x"},
    "GET /queue": {},
    "GET /verify": {},
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_console_refuses_hostile_fields(form: str, template: str, tmp_path: Path) -> None:
    """Each console form and page with each field hostile (a signed-in writer): an answer
    without a 500 or a traceback; a refused write stores nothing; the operator tools work
    afterwards."""
    from actorlog.web import ServeConfig, create_app
    from starlette.testclient import TestClient

    from ..web._client import BASE, TOKEN, csrf_of, sign_in

    path = _world.fresh_copy(template, str(tmp_path))
    url = f"sqlite:///{path}"
    f = Findings(f"console {form}")
    method, route = form.split(" ")[:2]
    fields = FORMS[form]
    cfg = ServeConfig(store_url=url, source=url, allow_writes=True, token=TOKEN)
    with TestClient(create_app(cfg), base_url=BASE, raise_server_exceptions=False) as client:
        sign_in(client)
        csrf = csrf_of(client.get("/actor", params={"id": "alpha"}).text)
        for name in fields or {"": ""}:
            for value_name, value in strings().items():
                if method == "GET" and value_name == "big":
                    continue  # longer than a URL the HTTP client sends
                data = {**fields, name: value} if name else dict(fields)
                # lone surrogates go as the bytes a client may send: invalid UTF-8
                encoded = urlencode(data, encoding="utf-8", errors="surrogatepass")
                before = _world.dump(path)
                if method == "POST":
                    r = client.post(
                        route,
                        content=f"{encoded}&csrf={csrf}",
                        headers={"content-type": "application/x-www-form-urlencoded"},
                        follow_redirects=False,
                    )
                else:
                    r = client.get(f"{route}?{encoded}", follow_redirects=False)
                body = r.text
                if r.status_code >= 500 or "Traceback" in body:
                    f.add(name, value_name, f"HTTP {r.status_code}: {body[:300]!r}")
                if r.status_code >= 400:
                    changed = _world.diff(before, _world.dump(path))
                    if changed:
                        f.add(name, value_name, f"HTTP {r.status_code} but stored: {changed}")
    broken = anyio.run(_tools_work, path, backend="asyncio")
    if broken:
        f.add("*", "*", broken)
    f.check(KNOWN_HOLES)


async def _tools_work(path: str) -> str | None:
    from .test_arguments import operator_tools_work

    try:
        await operator_tools_work(path)
    except Exception as exc:
        return f"the operator tools fail afterwards: {type(exc).__name__}: {exc}"
    return None
