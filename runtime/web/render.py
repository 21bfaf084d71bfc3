"""Pages from templates (Jinja2, autoescaped) and the actor timeline, drawn by the same code
as ``actorlog history --html`` (:func:`actorlog._views.html.render_item`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from starlette.responses import HTMLResponse

from .._views.html import render_item, trace_link
from .._views.term import (
    ago,
    call_text,
    clean,
    duration,
    in_doubt_text,
    json_text,
    short,
    task_text,
    when,
)
from .config import ServeConfig
from .window import Window, item_key, keyed

HERE = Path(__file__).parent

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"),
    autoescape=True,  # every value from the log is escaped; Markup only for _html's output
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters.update(
    {
        "clean": clean,
        "short": short,
        "when": lambda ts: "" if ts is None else when(ts),
        "ago": lambda ts: "-" if ts is None else ago(ts, time.time()),
        "json": lambda v: json_text(v, indent=2),
        "duration": duration,
    }
)
_env.globals.update(
    {"call_text": call_text, "in_doubt_text": in_doubt_text, "task_text": task_text}
)


def page(
    name: str, cfg: ServeConfig, *, status_code: int = 200, signed_in: bool = False, **ctx: Any
) -> HTMLResponse:
    """A whole page (``templates/NAME``) with what every page shows."""
    html = _env.get_template(name).render(
        cfg=cfg,
        can_write=cfg.allow_writes and signed_in,
        csrf=cfg.csrf_value() if cfg.allow_writes and signed_in else "",
        **ctx,
    )
    return HTMLResponse(html, status_code=status_code)


def fragment(name: str, **ctx: Any) -> str:
    """A template's HTML on its own (for the live updates of a page)."""
    return _env.get_template(name).render(**ctx)


def items(w: Window, cfg: ServeConfig) -> list[tuple[str, str]]:
    """A window's timeline items as (key, HTML), oldest first: the HTML export's items,
    escaped there, each with its ``data-key`` (live updates replace an item by its key)."""
    hint = f"actorlog resolve {cfg.source or 'STORE'} {w.actor.actor_id} {{seq}} ..."
    out = []
    for item in w.items:
        key = item_key(item)
        out.append((key, keyed(render_item(item, hint, trace_url=cfg.trace_url), key)))
    return out


def timeline(w: Window, cfg: ServeConfig) -> Markup:
    """A window's timeline, newest last."""
    return Markup("".join(h for _, h in items(w, cfg)))  # built by _html, which escapes


def step_links(w: Window, cfg: ServeConfig) -> list[dict[str, Any]]:
    """Per finished step: where a fork after it starts, and its trace link (if any)."""
    out = []
    for st in w.steps:
        if st.step_seq is None:
            continue
        out.append(
            {
                "message_seq": st.message_seq,
                "step_seq": st.step_seq,
                "message_type": st.message_type,
                "status": st.status,
                "trace": trace_link(cfg.trace_url, st),
            }
        )
    return out
