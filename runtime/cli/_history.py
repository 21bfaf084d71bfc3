"""``actorlog history`` on a terminal: an actor's status line, then its timeline, one row per
entry (seq, time of day, text), printed as the items come."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import ops
from .._journal.records import EventKind
from .._views.term import (
    Out,
    Style,
    ago,
    attempt_failed_text,
    call_text,
    cancelled_doubt_text,
    clean,
    concurrency_text,
    duration,
    effect_value,
    event_text,
    message_origin,
    short,
    status_text,
    task_text,
    waiting_in,
    when,
)

if TYPE_CHECKING:
    from collections.abc import Callable


_EVENT_COLOR: dict[str, str] = {
    EventKind.RECOVERED: "magenta",
    EventKind.QUARANTINED: "red",
    EventKind.STOPPED: "red",
    EventKind.SNAPSHOT_REJECTED: "red",
    EventKind.RESOLVED: "yellow",
    EventKind.IN_DOUBT: "yellow",
    EventKind.COMPACTED: "blue",
    EventKind.TERMINATED: "magenta",
    EventKind.CANCELLED: "yellow",
    EventKind.CANCEL_REQUESTED: "yellow",
}


class _Timeline:
    """Prints timeline rows: seq, time of day (with a date line when the day changes), text."""

    def __init__(self, out: Out) -> None:
        self.out = out
        self.day = ""

    def row(self, seq: int | str, ts: float | None, text: str) -> None:
        stamp = when(ts)
        if ts is not None and stamp[:10] != self.day:
            self.day = stamp[:10]
            self.out.line(self.out.s.dim(f"-- {self.day} --"))
        t = stamp[11:] if ts is not None else ""
        self.out.line(f"{seq!s:>6}  {t:8}  {text}")


def print_history(h: ops.History, out: Out, url: str) -> None:
    """Print a materialized history (:class:`HistoryPrinter` prints a stream)."""
    p = HistoryPrinter(out, url, since=h.since)
    for item in [h.actor, *h.timeline()]:
        p.item(item)
    p.end()


class HistoryPrinter:
    """Prints a history as it comes: the actor's status first, then the timeline."""

    def __init__(self, out: Out, url: str, *, since: int = 0) -> None:
        self.out = out
        self.url = url
        self.since = since
        self.t = _Timeline(out)
        self.actor_id = ""
        self.shown = 0
        self.written = 0  # ``snapshot`` events: every snapshot written, kept or not
        self.kept = 0

    def item(self, item: ops.HistoryItem) -> None:
        s, t = self.out.s, self.t
        if isinstance(item, ops.ActorStatus):
            self.actor_id = item.actor_id
            _print_header(item, self.out)
            return
        self.shown += 1
        if isinstance(item, ops.Step):
            _print_step(item, t, self.url, self.actor_id)
        elif isinstance(item, ops.SnapshotView):
            self.kept += 1
            text = s.dim(
                f"snapshot seq {item.seq} (handled up to {item.handled_seq}, {item.size:,} B)"
            )
            if not item.valid:
                text += s.red(clean(f" INVALID: {item.problem}"))
            t.row(item.seq, item.created_at, text)
        elif isinstance(item, ops.Event):
            self.written += item.kind == EventKind.SNAPSHOT
            color: Callable[[str], str] = getattr(s, _EVENT_COLOR.get(item.kind, "bold"))
            t.row("", item.at, color(clean(f"[{item.kind}] " + event_text(item))))
        else:
            t.row(
                item.seq,
                None,
                s.red(clean(f"DAMAGE seq {item.seq}: {item.check} check failed: {item.detail}")),
            )

    def end(self) -> None:
        if self.written or self.kept:
            self.out.line(self.out.s.dim(f"snapshots: {self.written} written, {self.kept} kept"))
        if not self.shown:
            since = self.since
            self.out.line(
                self.out.s.dim(f"(nothing after seq {since})" if since else "(empty log)")
            )


def _print_header(a: ops.ActorStatus, out: Out) -> None:
    s = out.s
    snap = "none"
    if a.last_snapshot_seq is not None:
        snap = f"seq {a.last_snapshot_seq}, {ago(a.last_snapshot_at)}"
    out.line(
        f"{s.bold(clean(a.actor_id))} ({clean(a.actor_type)})  status "
        f"{status_text(s, a.status)}  last seq {a.last_seq}  snapshot {snap}  "
        f"pending {a.pending_messages}"
    )
    if a.problem:
        out.line(s.red(f"  {clean(a.problem)}"))
    if a.first_seq > 1:  # compaction removed the start (see its 'compacted' events)
        out.line(s.dim(f"  log compacted: kept from seq {a.first_seq} (seqs before it removed)"))
    out.line()


_STEP_MARK = {
    "ok": ("ok", "green"),
    "error": ("ERROR", "red"),
    "in_doubt": ("IN DOUBT", "yellow"),
    "running": ("running", "blue"),
    "pending": ("pending", "blue"),
}


def _print_step(st: ops.Step, t: _Timeline, url: str, actor_id: str) -> None:
    s = t.out.s
    mark, color = _STEP_MARK.get(st.status, (st.status, "bold"))
    paint: Callable[[str], str] = getattr(s, color)
    sender = s.dim(f" from {clean(st.sender)}") if st.sender else ""
    label = s.bold(f"message {clean(st.message_id or '-')}")
    origin = message_origin(st.message_id)  # delivered by the timer loop
    if origin is not None:
        label = s.magenta(origin) + ": " + label
    t.row(
        st.message_seq,
        st.received_at,
        f"{paint(f'{mark:8}')} {label} {clean(st.message_type)} {short(st.body, 70)}{sender}",
    )
    indent = " " * 11
    items: list[tuple[int, ops.Call | ops.Effect]] = [(c.intent_seq, c) for c in st.calls]
    items += [(e.seq, e) for e in st.effects]
    items.sort(key=lambda x: x[0])
    concurrent = st.concurrent  # which task made what, and which calls overlapped
    waiting = waiting_in(st)  # what the step (each of its tasks) waits in now
    for seq, item in items:
        if isinstance(item, ops.Effect):
            value = effect_value(item, waiting=seq in waiting)
            if concurrent:
                value += f"  ({task_text(item.task)})"
            t.row(seq, None, s.dim(f"{indent}{clean(item.name):5} {value}"))
            continue
        t.row(seq, None, indent + _call_line(s, item))
        if concurrent:
            t.row("", None, f"{indent}  " + s.blue(concurrency_text(item)))
        for d in item.decisions:
            what = {
                "result": f"result {short(d.value, 50)}",
                "fail": f"fail {short(d.error, 60)}",
                "retry": "retry",
                "attempt": "retry started",
                "attempt_failed": attempt_failed_text(d),
            }.get(d.action, d.action)
            reason = f" - {clean(d.reason)}" if d.reason else ""
            if d.ignored:
                reason += " (ignored: the intent was already settled)"
            t.row(
                d.seq,
                d.at,
                f"{indent}  " + s.yellow(f"decision by {clean(d.by)}: {clean(what)}{reason}"),
            )
        if item.status in ops.NEEDS_OPERATOR:
            t.row(
                "",
                None,
                f"{indent}  "
                + s.yellow(
                    f"-> actorlog resolve {url} {actor_id} {item.intent_seq} "
                    "--result JSON | --retry | --fail MESSAGE"
                ),
            )
    if st.step_seq is None:
        return
    took = s.dim(duration(st.duration))
    if st.status == "ok":
        text = f"{s.green('reply')} {short(st.reply, 70)}  {took}"
    else:
        err = st.error or {}
        text = s.red(f"error {err.get('type')}: {short(err.get('message'), 70)}") + f"  {took}"
    t.row(st.step_seq, st.finished_at, indent + text)


def _call_line(s: Style, c: ops.Call) -> str:
    kind = "read " if c.effect == "read" else "write"
    call = call_text(c.tool, c.args, c.kwargs)
    if c.status == "ok":
        outcome = s.green("ok") + f" {duration(c.duration)} -> {short(c.value, 50)}"
    elif c.status == "error":
        err = c.error or {}
        outcome = s.red(f"error {err.get('type')}: {short(err.get('message'), 50)}")
    elif c.status == "resolved":
        outcome = s.yellow("resolved") + f" -> {short(c.value, 50)}"
    elif c.status == "failed_by_operator":
        outcome = s.yellow("failed by operator")
    elif c.status in ops.NEEDS_OPERATOR:
        outcome = s.yellow(f"IN DOUBT (policy {c.policy}: waits for an operator)")
    elif c.status == "auto":
        outcome = s.blue(f"in doubt (policy {c.policy}: settled by the runtime on recovery)")
    elif c.status == "retry_authorized":
        outcome = s.yellow("retry authorized")
    else:
        outcome = c.status
    doubt = cancelled_doubt_text(c)
    if doubt:
        outcome += "  " + (s.yellow(doubt) if c.needs_ruling else doubt)
    extra = f"  key {clean(c.key)}" if c.effect == "write" else ""
    if c.recorded_key is not None:
        extra += f" (the copied intent says {clean(c.recorded_key)})"
    if c.attempts > 1:
        extra += f"  attempt {c.attempts}"
    return f"{kind} {call}  {outcome}" + s.dim(extra)
