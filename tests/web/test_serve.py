"""``actorlog serve`` as a real process: the command, its banner and warnings, the web
extra's absence, live updates over server-sent events while a runtime writes the file, and
trace links."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from actorlog.web.serve import build

from tests.web._serve import ROOT, live_worker, serve


def test_serve_prints_how_to_sign_in_and_serves_the_overview(crashed: Path) -> None:
    with serve(crashed, "--allow-writes", "--token", "tok-1") as s:
        assert f"actorlog console for {crashed} at {s.base}/" in s.banner
        assert f"  {s.base}/login?token=tok-1" in s.banner
        r = httpx.get(s.base + "/")
        assert r.status_code == 200 and 'data-actor="incident-7"' in r.text
        # bound to loopback: a Host other than a loopback name is refused (DNS rebinding)
        rebound = httpx.get(s.base + "/", headers={"host": "evil.example"})
        assert rebound.status_code == 400


def test_serve_is_read_only_by_default(crashed: Path) -> None:
    with serve(crashed) as s:
        assert any(line.startswith("read-only") for line in s.banner)
        r = httpx.post(s.base + "/resolve", data={"id": "incident-7", "intent_seq": "19"})
        assert r.status_code == 403 and "read-only" in r.text


def test_binding_wider_without_a_token_warns() -> None:
    err = io.StringIO()
    cfg = build(
        "sqlite:///x.db",
        "x.db",
        host="0.0.0.0",
        port=8470,
        allow_writes=False,
        token=None,
        trace_url=None,
        err=err,
    )
    assert "warning: bound to 0.0.0.0 without a token" in err.getvalue()
    assert cfg.allowed_hosts is None
    quiet = io.StringIO()
    local = build(
        "sqlite:///x.db",
        "x.db",
        host="127.0.0.1",
        port=8470,
        allow_writes=True,
        token=None,
        trace_url=None,
        err=quiet,
    )
    assert "warning" not in quiet.getvalue()
    assert local.token and f"login?token={local.token}" in quiet.getvalue()  # generated


def test_without_the_web_extra_serve_says_what_to_install(crashed: Path) -> None:
    code = (
        "import sys; sys.modules['starlette'] = None\n"  # as if not installed
        "from actorlog.cli._main import main\n"
        f"sys.exit(main(['serve', {str(crashed)!r}]))"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert p.returncode == 2
    assert "pip install 'actorlog[web]'" in p.stderr


def test_importing_actorlog_does_not_import_the_console() -> None:
    code = (
        "import sys, actorlog, actorlog.ops, actorlog.cli._main\n"
        "print(sorted(m for m in ('starlette', 'jinja2', 'uvicorn') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def _next_update(lines: object) -> dict[str, Any]:
    event = None
    for line in lines:  # type: ignore[attr-defined]  # an iterator of str
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == "update":
            data: dict[str, Any] = json.loads(line[6:])
            return data
    raise AssertionError("the stream ended")


def _steps(update: dict[str, Any]) -> list[str]:
    return [i["key"] for i in update["items"] if i["key"].startswith("step-")]


def test_the_live_stream_sends_each_new_step_while_a_runtime_writes(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    template = "http://localhost:16686/trace/{trace_id}"
    with live_worker(db) as worker, serve(db, "--trace-url", template) as s:
        page = httpx.get(s.base + "/actor", params={"id": "chat-1"}).text
        links = re.findall(r'href="http://localhost:16686/trace/([0-9a-f]{32})"', page)
        assert links, "a step run with tracing links to its trace"
        after = re.search(r"after=(\d+)", page)
        assert after is not None and after.group(1) == "4"  # the page shows up to seq 4
        with httpx.stream(
            "GET",
            s.base + "/actor/live",
            params={"id": "chat-1", "after": "0"},  # shows nothing yet: the first update
            timeout=30,
        ) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = r.iter_lines()
            first = _next_update(lines)
            assert _steps(first) == ["step-1"] and first["after"] == 4
            worker.ask("second <message>")
            second = _next_update(lines)
        assert second["after"] > first["after"]
        assert _steps(second) == ["step-5"]  # only what is new
        html = "".join(i["html"] for i in second["items"])
        assert "&lt;message&gt;" in html and "<message>" not in html
        assert 'data-key="step-5"' in html
        assert second["status"] == "idle" and second["reset"] is False
