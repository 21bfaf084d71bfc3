"""A self-contained HTML timeline of one actor (``actorlog history --html``).

One file, inline CSS, no scripts and no network resources, so it can be attached to an
incident ticket and opened anywhere. Built from :class:`actorlog.ops.History`.
"""

from __future__ import annotations

import html
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio

from .. import ops
from .term import (
    attempt_failed_text,
    cancelled_doubt_text,
    clean,
    concurrency_text,
    duration,
    effect_value,
    event_text,
    json_text,
    message_origin,
    shown_parallel,
    task_text,
    waiting_in,
    when,
)

__all__ = ["CSS", "render_history", "render_item", "trace_link", "write_history"]

_CSS = """
:root { --ok:#1a7f37; --err:#cf222e; --warn:#9a6700; --info:#0969da; --dim:#6e7781;
        --bg:#ffffff; --card:#f6f8fa; --line:#d0d7de; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px; background: var(--bg); color: #1f2328;
       font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
                   font-size: 12.5px; }
h1 { font-size: 22px; margin: 0 0 4px; }
.sub { color: var(--dim); margin-bottom: 16px; }
.facts { display: flex; flex-wrap: wrap; gap: 8px 24px; margin: 12px 0 20px; }
.facts div > span:first-child { color: var(--dim); margin-right: 6px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
         font-weight: 600; color: #fff; background: var(--dim); vertical-align: 1px;
         white-space: nowrap; }
.b-ok, .b-idle { background: var(--ok); }
.b-error, .b-quarantined, .b-stopped, .b-damage { background: var(--err); }
.b-in_doubt, .b-retry_interrupted, .b-resolved, .b-failed_by_operator,
.b-retry_authorized { background: var(--warn); }
.b-running, .b-pending, .b-auto { background: var(--info); }
.b-terminated { background: #8250df; }
.callout { border: 1px solid var(--warn); background: #fff8c5; border-radius: 6px;
           padding: 10px 14px; margin: 0 0 20px; }
.callout.bad { border-color: var(--err); background: #ffebe9; }
.callout code { background: rgba(255,255,255,.7); padding: 1px 4px; border-radius: 4px; }
.timeline { border-left: 3px solid var(--line); margin-left: 8px; padding-left: 20px; }
.item { position: relative; margin: 0 0 14px; }
.item::before { content: ""; position: absolute; left: -28px; top: 9px; width: 13px;
                height: 13px; border-radius: 50%; background: var(--line);
                border: 2px solid var(--bg); }
.step { background: var(--card); border: 1px solid var(--line); border-radius: 6px;
        padding: 10px 14px; }
.step.s-ok::before { background: var(--ok); }
.step.s-error::before { background: var(--err); }
.step.s-in_doubt::before { background: var(--warn); }
.step.s-running::before, .step.s-pending::before { background: var(--info); }
.step.s-in_doubt { border-color: var(--warn); }
.step.s-error { border-color: #ff818266; }
.head { display: flex; gap: 10px; align-items: baseline; flex-wrap: wrap; }
.seq { color: var(--dim); min-width: 56px; }
.time { color: var(--dim); }
.msg { font-weight: 600; }
.body { margin: 6px 0 8px; }
table { border-collapse: collapse; width: 100%; margin-top: 6px; }
td, th { text-align: left; padding: 3px 8px 3px 0; vertical-align: top;
         border-top: 1px solid var(--line); }
th { color: var(--dim); font-weight: 500; font-size: 12px; border-top: none; }
td.num, td.key { color: var(--dim); white-space: nowrap; }
tr.effect td { color: var(--dim); }
.conc { color: var(--info); font-size: 12px; margin-top: 2px; }
tr.decision td { background: #fff8c5; }
.val { max-width: 520px; overflow-wrap: anywhere; }
.reply { margin-top: 8px; }
.reply.err { color: var(--err); }
details summary { cursor: pointer; color: var(--info); }
pre { background: #fff; border: 1px solid var(--line); border-radius: 4px; padding: 8px;
      overflow-x: auto; max-height: 360px; margin: 6px 0 0; }
.marker { color: var(--dim); padding: 2px 0; }
.marker::before { top: 6px; width: 9px; height: 9px; left: -26px; }
.event { border-radius: 6px; padding: 6px 12px; background: #ddf4ff; }
.event.e-quarantined, .event.e-stopped, .event.e-snapshot_rejected, .damage {
  background: #ffebe9; color: var(--err); }
.event.e-resolved, .event.e-in_doubt, .event.e-cancelled, .event.e-cancel_requested {
  background: #fff8c5; }
.event.e-terminated, .event.e-finished { background: #f6f0ff; font-weight: 600; }
.event.e-recovered::before { background: #8250df; }
.damage::before { background: var(--err); }
.damage { border-radius: 6px; padding: 6px 12px; font-weight: 600; }
footer { color: var(--dim); margin-top: 28px; font-size: 12px; }
"""


def _e(text: Any) -> str:
    """Every text that goes into the page: HTML-escaped, control characters made visible."""
    return html.escape(clean(text), quote=True)


def _e_lines(text: str) -> str:
    """Pretty JSON for a ``<pre>``: its own line breaks kept (JSON escapes every control
    character inside a string, so a raw newline is the formatter's), the rest as :func:`_e`."""
    return "\n".join(_e(line) for line in text.split("\n"))


def _when(ts: float | None) -> str:
    return "" if ts is None else when(ts)


def _json(value: Any) -> str:
    return json_text(value, separators=(",", ":"))


def _short(value: Any, limit: int = 90) -> str:
    text = _json(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(value: Any, limit: int = 90) -> str:
    """A value, shortened, with the full pretty JSON in a details element when long."""
    text = _json(value)
    if len(text) <= limit:
        return f'<code class="val">{_e(text)}</code>'
    pretty = json_text(value, indent=2)
    return (
        f"<details><summary><code>{_e(_short(value, limit))}</code></summary>"
        f"<pre>{_e_lines(pretty)}</pre></details>"
    )


def _step_time(st: ops.Step) -> str:
    """When a step stands in the timeline (where it finished, see ``Step.placed_at``), and
    when it started if that was earlier (a step a recovery resumed)."""
    shown = _when(st.placed_at)
    started = _when(st.started_at)
    if started == shown:
        return f'<span class="time">{_e(shown)}</span>'
    return f'<span title="started {_e(started)}" class="time">{_e(shown)}</span>'


def _hint(resolve_hint: str, seq: int) -> str:
    """The resolve command for one intent (``replace``: an actor id may hold braces)."""
    return resolve_hint.replace("{seq}", str(seq))


def _badge(status: str, text: str | None = None) -> str:
    return f'<span class="badge b-{_e(status)}">{_e(text or status.replace("_", " "))}</span>'


def _effect_value(ef: ops.Effect, waiting: bool = False) -> str:
    if ef.name in ("now", "sleep", "send_later", "finish"):
        return effect_value(ef, waiting=waiting)
    return _short(ef.value, 120)


def _call_row(c: ops.Call, concurrent: bool = False) -> str:
    args = ", ".join(
        [_short(a, 60) for a in c.args] + [f"{k}={_short(v, 60)}" for k, v in c.kwargs.items()]
    )
    if c.status in ("ok", "resolved"):
        outcome = _value(c.value)
    elif c.status in ("error", "failed_by_operator"):
        err = c.error or {}
        outcome = f'<span class="mono">{_e(err.get("type"))}: {_e(err.get("message"))}</span>'
    elif c.status in ops.NEEDS_OPERATOR:
        outcome = "may or may not have happened: waits for an operator"
    elif c.status == "auto":
        outcome = f"in doubt; the runtime settles it on recovery (policy {_e(c.policy)})"
    else:
        outcome = ""
    doubt = cancelled_doubt_text(c)
    if doubt:
        outcome += f'<div class="doubt">{_e(doubt)}</div>'
    key = _e(c.key) if c.effect == "write" else ""
    attempts = f" (attempt {c.attempts})" if c.attempts > 1 else ""
    conc = data = ""
    if concurrent:  # which task made it, when it ran, what it overlapped (_term's words)
        conc = f'<div class="conc">{_e(concurrency_text(c))}</div>'
        data = (
            f' data-task="{_e(c.task or "")}" data-parallel-with="'
            + " ".join(str(n) for n in shown_parallel(c))
            + '"'
        )
    return (
        f'<tr class="call c-{_e(c.status)}" data-intent-seq="{c.intent_seq}"{data}>'
        f'<td class="num">{c.intent_seq}</td><td>{_e(c.effect)}</td>'
        f'<td><code class="val">{_e(c.tool)}({_e(args)})</code>{conc}</td>'
        f"<td>{_badge(c.status)}{attempts}</td><td>{outcome}</td>"
        f'<td class="mono key">{key}</td><td class="num">{duration(c.duration)}</td></tr>'
    )


def _decision_row(d: ops.Decision) -> str:
    what = {
        "result": f"result {_short(d.value, 60)}",
        "retry": "retry",
        "fail": f"fail {_short(d.error, 80)}",
        "attempt": "retry started",
        "attempt_failed": attempt_failed_text(d),
    }.get(d.action, d.action)
    reason = f" — {d.reason}" if d.reason else ""
    if d.ignored:
        reason += " (ignored: the intent was already settled)"
    return (
        f'<tr class="decision"><td class="num">{d.seq}</td><td>decision</td>'
        f'<td colspan="5">{_e(what)} by <b>{_e(d.by)}</b> at {_e(_when(d.at))}{_e(reason)}'
        "</td></tr>"
    )


def trace_link(template: str | None, st: ops.Step) -> str | None:
    """The step's trace in the user's OpenTelemetry backend: ``template`` with
    ``{trace_id}`` (and ``{span_id}``) filled in, or None (no template, or no trace)."""
    if not template or st.trace_id is None:
        return None
    return template.replace("{trace_id}", st.trace_id).replace("{span_id}", st.span_id or "")


def _step(st: ops.Step, resolve_hint: str, trace_url: str | None = None) -> str:
    rows: list[tuple[int, str]] = []
    concurrent = st.concurrent
    for c in st.calls:
        rows.append((c.intent_seq, _call_row(c, concurrent)))
        for d in c.decisions:
            rows.append((d.seq, _decision_row(d)))
    now = waiting_in(st)
    for ef in st.effects:
        waiting = ef.seq in now  # what the step (each of its tasks) waits in now
        by = f" ({task_text(ef.task)})" if concurrent else ""
        rows.append(
            (
                ef.seq,
                (
                    f'<tr class="effect"><td class="num">{ef.seq}</td><td>{_e(ef.name)}</td>'
                    f'<td colspan="5"><code>{_e(_effect_value(ef, waiting))}</code>'
                    f"{_e(by)}</td></tr>"
                ),
            )
        )
    rows.sort(key=lambda r: r[0])
    table = ""
    if rows:
        table = (
            "<table><tr><th>seq</th><th>effect</th><th>call</th><th>status</th>"
            "<th>result</th><th>idempotency key</th><th>took</th></tr>"
            + "".join(r for _, r in rows)
            + "</table>"
        )
    end = ""
    if st.step_seq is not None and st.status == "ok":
        end = (
            f'<div class="reply">reply (seq {st.step_seq}, {_when(st.finished_at)[11:]}, '
            f"took {duration(st.duration)}): "
            f"{_value(st.reply, 120)}</div>"
        )
    elif st.step_seq is not None:
        err = st.error or {}
        end = (
            f'<div class="reply err">handler error (seq {st.step_seq}): '
            f'<span class="mono">{_e(err.get("type"))}: {_e(err.get("message"))}</span></div>'
        )
    hint = ""
    if st.status == "in_doubt":
        cmds = "".join(
            f"<div><code>{_e(resolve_hint.replace('{seq}', str(c.intent_seq)))}</code></div>"
            for c in st.calls
            if c.status in ops.NEEDS_OPERATOR
        )
        hint = f'<div class="callout">Settle with: {cmds}</div>'
    sender = f' from <span class="mono">{_e(st.sender)}</span>' if st.sender else ""
    origin = message_origin(st.message_id)
    if origin is not None:  # delivered by the timer loop
        sender = f' <span class="timer">{_e(origin)}</span>' + sender
    par = ' data-concurrent="true"' if concurrent else ""
    link = trace_link(trace_url, st)
    if link is not None:
        sender += f' <a class="trace" href="{_e(link)}" rel="noopener noreferrer">trace</a>'
    return (
        f'<section class="item step s-{_e(st.status)}" id="step-{st.message_seq}" '
        f'data-seq="{st.message_seq}" data-status="{_e(st.status)}"{par}>'
        f'<div class="head"><span class="seq mono">#{st.message_seq}</span>'
        f"{_step_time(st)}"
        f'<span class="msg">{_e(st.message_type)}</span>'
        f'<span class="mono">{_e(st.message_id or "")}</span>{sender}{_badge(st.status)}</div>'
        f'<div class="body">{_value(st.body, 140)}</div>{table}{end}{hint}</section>'
    )


#: The timeline's style sheet (also served by the console).
CSS = _CSS


def render_history(h: ops.History, *, source: str = "") -> str:
    """The HTML page for one actor's history."""
    hint = _resolve_hint(h.actor, source)
    parts = [_item(item, hint) for item in h.timeline()]
    rulings = [c for st in h.steps for c in st.calls if c.needs_ruling]
    return _page(h.actor, source, h.since, "".join(parts), len(h.steps), len(h.damage), rulings)


async def write_history(
    items: AsyncIterator[ops.HistoryItem], path: str, *, source: str = "", since: int = 0
) -> None:
    """Write the HTML page for a streamed history (:func:`actorlog.ops.iter_history`)
    to ``path``. The timeline goes to a temporary file as it comes (the counts at the top of
    the page are known only at the end), so memory stays small for a long log."""
    actor: ops.ActorStatus | None = None
    steps = damage = 0
    hint = ""
    rulings: list[ops.Call] = []
    with tempfile.TemporaryFile("w+", encoding="utf-8") as body:
        async for item in items:
            if isinstance(item, ops.ActorStatus):
                actor, hint = item, _resolve_hint(item, source)
                continue
            steps += isinstance(item, ops.Step)
            damage += isinstance(item, ops.Finding)
            if isinstance(item, ops.Step):
                rulings += [c for c in item.calls if c.needs_ruling]
            body.write(_item(item, hint))
        assert actor is not None
        head, tail = _page(actor, source, since, "\0", steps, damage, rulings).split("\0")
        body.seek(0)
        async with await anyio.open_file(path, "w", encoding="utf-8") as f:
            await f.write(head)
            while chunk := body.read(1 << 20):
                await f.write(chunk)
            await f.write(tail)


def _resolve_hint(a: ops.ActorStatus, source: str) -> str:
    return (
        f"actorlog resolve {source or 'STORE'} {a.actor_id} {{seq}} "  # .replace, not .format
        "--result JSON | --retry | --fail MESSAGE"
    )


def render_item(
    item: ops.Step | ops.SnapshotView | ops.Event | ops.Finding,
    resolve_hint: str,
    *,
    trace_url: str | None = None,
) -> str:
    """One timeline item as an HTML fragment, every value escaped (the page here and the
    console, ``actorlog serve``, draw the same timeline). ``resolve_hint`` is the resolve
    command shown under an in-doubt step (``{seq}`` stands for the intent's seq);
    ``trace_url`` a template for :func:`trace_link`."""
    return _item(item, resolve_hint, trace_url)


def _item(
    item: ops.Step | ops.SnapshotView | ops.Event | ops.Finding,
    resolve_hint: str,
    trace_url: str | None = None,
) -> str:
    if isinstance(item, ops.Step):
        return _step(item, resolve_hint, trace_url)
    if isinstance(item, ops.SnapshotView):
        bad = "" if item.valid else f" — INVALID: {_e(item.problem)}"
        return (
            f'<div class="item marker snapshot" data-seq="{item.seq}">'
            f"snapshot at seq {item.seq} (handled up to {item.handled_seq}, "
            f"{item.size:,} bytes) · {_e(_when(item.created_at))}{bad}</div>"
        )
    if isinstance(item, ops.Event):
        return (
            f'<div class="item event e-{_e(item.kind)}" data-kind="{_e(item.kind)}">'
            f'<b>{_e(item.kind.replace("_", " "))}</b> · <span class="time">'
            f"{_e(_when(item.at))}</span><br>{_e(event_text(item))}</div>"
        )
    return (
        f'<div class="item damage" data-seq="{item.seq}">damaged entry at seq '
        f"{item.seq}: {_e(item.check)} check failed ({_e(item.detail)})</div>"
    )


def _page(
    a: ops.ActorStatus,
    source: str,
    since_seq: int,
    timeline: str,
    steps: int,
    damage: int,
    rulings: list[ops.Call],
) -> str:
    resolve_hint = _resolve_hint(a, source)
    callouts = ""
    waiting = [i for i in a.in_doubt if i.needs_operator]
    if waiting or rulings:
        items = "".join(
            f"<li>intent seq {i.intent_seq}: <code>{_e(i.tool)}</code>, key "
            f"<code>{_e(i.key)}</code> — <code>{_e(_hint(resolve_hint, i.intent_seq))}</code>"
            "</li>"
            for i in waiting
        )
        rule = resolve_hint.replace(" | --retry", "")  # a ruling: a result or a failure
        items += "".join(
            f'<li class="ruling">intent seq {c.intent_seq}: <code>{_e(c.tool)}</code> '
            f"({_e(task_text(c.task))}), cancelled by its handler while it ran, needs a "
            f"ruling — <code>{_e(_hint(rule, c.intent_seq))}</code></li>"
            for c in rulings
        )
        callouts += (
            f'<div class="callout"><b>{len(waiting) + len(rulings)} tool call(s) may or may '
            f"not have happened</b> and wait for an operator:<ul>{items}</ul></div>"
        )
    if a.problem:
        callouts += f'<div class="callout bad"><b>{_e(a.status)}</b>: {_e(a.problem)}</div>'
    if damage:
        callouts += (
            f'<div class="callout bad"><b>{damage} damaged entr'
            f"{'y' if damage == 1 else 'ies'}</b> in this history; "
            "run <code>actorlog verify</code>.</div>"
        )
    snap = "none"
    if a.last_snapshot_seq is not None:
        snap = f"seq {a.last_snapshot_seq} ({_when(a.last_snapshot_at)})"
    since = f" · since seq {since_seq}" if since_seq else ""
    facts = "".join(
        f"<div><span>{_e(k)}</span>{v}</div>"
        for k, v in [
            ("status", _badge(a.status)),
            ("last seq", str(a.last_seq)),
            ("handled up to", str(a.handled_seq)),
            ("pending messages", str(a.pending_messages)),
            ("last snapshot", _e(snap)),
            ("steps shown", str(steps)),
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>actorlog · {_e(a.actor_id)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{_e(a.actor_id)}</h1><div class="sub">{_e(a.actor_type)} · '
        f'{_e(source)}{since}</div><div class="facts">{facts}</div>{callouts}'
        f'<main class="timeline">{timeline}</main>'
        f"<footer>Generated by actorlog at {_e(_when(time.time()))}. Times are local. "
        "Self-contained: no scripts, no network resources.</footer></body></html>\n"
    )
