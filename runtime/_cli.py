"""The ``actorlog`` command: the operator's view of a store (see docs/operators.md).

Thin: parsing, printing and exit codes. Everything it knows about the log comes from
:mod:`actorlog.ops`, which is the same thing as a Python API.

Exit codes: 0 done; 1 ``verify`` found damage, or ``fork`` refused without ``--yes``;
2 anything that could not be done (bad arguments, store unreadable, actor or entry not found,
intent not in doubt). Errors go to stderr as one line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import re
import shutil
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlsplit, urlunsplit

import anyio
import attrs

from . import ops
from ._errors import ActorlogError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

__all__ = ["main"]

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2

_EPILOG = """\
STORE is a store URL (sqlite:///relative.db, sqlite:////absolute.db, postgresql://...) or the
path of a SQLite file. Stores are opened read-only, except by 'resolve' and 'fork'; reading is
safe while a runtime is using the store.

exit codes: 0 done; 1 verify found damage, or fork refused without --yes; 2 could not do it
(bad arguments, store unreadable, actor or entry not found, intent not in doubt).
"""


# -- terminal manners --------------------------------------------------------------------


class Style:
    """ANSI colors, only when asked for (a TTY without NO_COLOR, or --color=always)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def red(self, t: str) -> str:
        return self._wrap("31", t)

    def green(self, t: str) -> str:
        return self._wrap("32", t)

    def yellow(self, t: str) -> str:
        return self._wrap("33", t)

    def blue(self, t: str) -> str:
        return self._wrap("34", t)

    def magenta(self, t: str) -> str:
        return self._wrap("35", t)

    def dim(self, t: str) -> str:
        return self._wrap("2", t)

    def bold(self, t: str) -> str:
        return self._wrap("1", t)


def _use_color(choice: str, stream: TextIO) -> bool:
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return stream.isatty()


class Out:
    """Lines to stdout, cut to the terminal width on a TTY (values are always shortened)."""

    def __init__(self, style: Style, stream: TextIO) -> None:
        self.s = style
        self.stream = stream
        self.width: int | None = (
            shutil.get_terminal_size((100, 24)).columns if stream.isatty() else None
        )

    def line(self, text: str = "") -> None:
        text = _clean_line(text, self.s.enabled)
        if self.width is not None and len(_ANSI.sub("", text)) > self.width:
            text = _cut_ansi(text, self.width - 1) + "…" + ("\x1b[0m" if self.s.enabled else "")
        self.stream.write(text + "\n")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")

#: Characters a terminal may act on: C0 controls (newline included: a value never spans
#: lines), DEL, C1 controls (0x9b is CSI on some terminals), bidi overrides and isolates
#: (they reorder what the operator reads), line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
#: The only escape sequences this command writes itself (Style): SGR colors.
_OWN_SGR = re.compile(r"(\x1b\[(?:0|1|2|3[1-5])m)")


def _escape_char(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def clean(value: object) -> str:
    """``value`` as text that is safe on a terminal: every control character escaped
    (``\\x1b``, ``\\x07``, ``\\u202e``). Every value read from a store goes through it."""
    return _CONTROL.sub(_escape_char, str(value))


def _clean_line(text: str, keep_style: bool) -> str:
    """A whole output line, safe: with colors on, only this command's own SGR sequences
    survive; everything else that a terminal could act on is escaped."""
    if not keep_style:
        return clean(text)
    parts = _OWN_SGR.split(text)
    return "".join(p if i % 2 else clean(p) for i, p in enumerate(parts))


#: What json.dumps leaves raw inside strings (it escapes C0 there; a raw newline in its
#: output is indentation, outside any string).
_JSON_RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _json_safe_text(text: str) -> str:
    """JSON text with the characters JSON leaves raw (DEL, C1, bidi controls) escaped as
    ``\\uXXXX``: still the same JSON value, and safe to print."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _cut_ansi(text: str, n: int) -> str:
    """The first ``n`` visible characters of ``text``, keeping escape sequences."""
    out, seen, i = [], 0, 0
    while i < len(text) and seen < n:
        if text[i] == "\x1b":
            j = text.find("m", i)
            out.append(text[i : j + 1])
            i = j + 1
            continue
        out.append(text[i])
        seen += 1
        i += 1
    return "".join(out)


def short(value: Any, limit: int = 80) -> str:
    """A value as compact JSON, shortened with an ellipsis (terminal-safe)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        text = repr(_finite(value))
    text = clean(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _call_text(tool: str, args: Sequence[Any], kwargs: dict[str, Any], limit: int = 60) -> str:
    parts = [short(a, limit) for a in args] + [f"{k}={short(v, limit)}" for k, v in kwargs.items()]
    inner = ", ".join(parts)
    if len(inner) > limit:
        inner = inner[: limit - 1] + "…"
    return f"{clean(tool)}({inner})"


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    try:
        return datetime.datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError, TypeError):  # damage: NaN, inf, out of range
        return f"DAMAGED time {clean(ts)}"


def ago(ts: float | None, now: float | None = None) -> str:
    if ts is None:
        return "-"
    if not isinstance(ts, int | float) or not math.isfinite(ts):
        return f"DAMAGED time {clean(ts)}"
    d = max(0.0, (now or time.time()) - ts)
    if d < 60:
        return f"{d:.0f}s ago"
    if d < 3600:
        return f"{d / 60:.0f}m ago"
    if d < 86400:
        return f"{d / 3600:.1f}h ago"
    return f"{d / 86400:.1f}d ago"


def effect_value(e: ops.Effect) -> str:
    if e.name == "now" and isinstance(e.value, int | float):
        try:
            return (
                datetime.datetime.fromtimestamp(e.value)
                .astimezone()
                .isoformat(timespec="milliseconds")
            )
        except (OverflowError, OSError, ValueError):
            return f"DAMAGED time {e.value}"
    return short(e.value, 70)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s"


class Progress:
    """A one-line progress display on stderr, only when stderr is a TTY."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.last = 0.0
        self.shown = False

    def __call__(self, actor_id: str, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.last < 0.1:
            return
        self.last = now
        pct = f" ({100 * done // total}%)" if total else ""
        bar = ""
        if total:
            filled = 24 * min(done, total) // total
            bar = "[" + "#" * filled + "-" * (24 - filled) + "] "
        self.stream.write(
            f"\r\x1b[Kverifying {bar}{done:,}/{total:,} entries{pct}  {clean(actor_id)}"
        )
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _store_url(arg: str) -> str:
    """A URL, or a path to a SQLite file."""
    if "://" in arg:
        return arg
    return "sqlite:///" + os.path.abspath(arg)


def shown_url(arg: str) -> str:
    """The store as given, without a password (it ends up in shared HTML and terminals)."""
    try:
        parts = urlsplit(arg)
        if parts.password is None:
            return arg
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return arg


def _finite(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float (only damage puts one in a store) replaced by
    a string naming it, so that JSON output stays valid JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return f"damaged: not a finite number ({obj})"
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def _json_text(obj: Any, **kwargs: Any) -> str:
    """Strict JSON (never NaN or Infinity), safe to print on a terminal."""
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, default=str, **kwargs)
    except ValueError:
        text = json.dumps(_finite(obj), ensure_ascii=False, allow_nan=False, default=str, **kwargs)
    return _json_safe_text(text)


def _json_line(stream: TextIO, obj: Any) -> None:
    stream.write(_json_text(obj, separators=(",", ":")) + "\n")


# -- commands ----------------------------------------------------------------------------

STATUS_COLOR = {
    "idle": "green",
    "running": "blue",
    "in_doubt": "yellow",
    "quarantined": "red",
    "failed": "red",
}


def _status_text(s: Style, status: str) -> str:
    color: Callable[[str], str] = getattr(s, STATUS_COLOR.get(status, "bold"))
    return color(status)


async def cmd_leases(args: argparse.Namespace, out: Out) -> int:
    """``actorlog leases``: the ownership view (kept apart from ``actors``)."""
    async with ops.opened(_store_url(args.store)) as store:
        found = await ops.leases(store)
    if args.json:
        for lease in found:
            _json_line(out.stream, {**attrs.asdict(lease), "live": lease.live})
        return EXIT_OK
    if not found:
        out.line("no leases in this store")
        return EXIT_OK
    header = ["ACTOR", "OWNER", "TOKEN", "EXPIRES IN"]
    rows = [
        [
            lease.actor_id,
            lease.owner or "-",
            str(lease.token),
            f"{lease.expires_in:.1f}s" if lease.live else "free",
        ]
        for lease in found
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out.line(
        out.s.bold("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    )
    for r in rows:
        out.line("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return EXIT_OK


async def cmd_actors(args: argparse.Namespace, out: Out) -> int:
    async with ops.opened(_store_url(args.store)) as store:
        actors = await ops.list_actors(store)
    if args.json:
        for a in actors:
            _json_line(out.stream, ops.to_json(a))
        return EXIT_OK
    s = out.s
    if not actors:
        out.line("no actors in this store")
        return EXIT_OK
    now = time.time()
    header = ["ACTOR", "TYPE", "STATUS", "LAST SEQ", "SNAPSHOT", "PENDING", "IN DOUBT"]
    rows = []
    for a in actors:
        snap = (
            "-"
            if a.last_snapshot_seq is None
            else (f"{a.last_snapshot_seq} ({ago(a.last_snapshot_at, now)})")
        )
        doubt = (
            ", ".join(
                f"{i.intent_seq} {clean(i.tool)}" + ("" if i.needs_operator else f" ({i.state})")
                for i in a.in_doubt
            )
            or "-"
        )
        rows.append(
            [
                clean(a.actor_id),
                clean(a.actor_type),
                a.status,
                str(a.last_seq),
                snap,
                str(a.pending_messages),
                doubt,
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    out.line(s.bold("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()))
    for r in rows:
        cells = [
            c.ljust(w) if i != 3 and i != 5 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        cells[2] = _status_text(s, r[2]) + " " * (widths[2] - len(r[2]))
        out.line("  ".join(cells).rstrip())
    for a in actors:
        if a.problem:
            out.line(s.red(clean(f"{a.actor_id}: {a.problem}")))
    waiting = [(a, i) for a in actors for i in a.in_doubt if i.needs_operator]
    if waiting:
        out.line()
        out.line(s.yellow(f"{len(waiting)} tool call(s) may or may not have happened:"))
        for a, i in waiting:
            out.line(
                f"  {clean(a.actor_id)} intent {i.intent_seq}: "
                f"{_call_text(i.tool, i.args, i.kwargs)} key {clean(i.key)}"
            )
            out.line(
                s.dim(
                    f"    actorlog resolve {shown_url(args.store)} {clean(a.actor_id)} "
                    f"{i.intent_seq} "
                    "--result JSON | --retry | --fail MESSAGE"
                )
            )
    return EXIT_OK


def _event_text(e: ops.Event) -> str:
    d = e.detail
    if e.kind == "recovered":
        snap = d.get("snapshot_seq") or 0
        start = f"snapshot seq {snap}" if snap else "the start of the log"
        text = (
            f"recovered from {start}: {d.get('steps_replayed', 0)} step(s) replayed, "
            f"{d.get('pending_messages', 0)} pending, {d.get('in_doubt', 0)} in doubt "
            f"({duration(d.get('duration_s'))})"
        )
        rejected = d.get("snapshots_rejected") or []
        if rejected:
            text += "; rejected snapshots: " + ", ".join(f"{s} ({r})" for s, r in rejected)
        return text
    if e.kind == "snapshot_rejected":
        return f"snapshot seq {d.get('seq')} rejected: {d.get('reason')}"
    if e.kind in ("quarantined", "stopped"):
        etype = f"{d['error_type']}: " if d.get("error_type") else ""
        return f"{e.kind}: {etype}{d.get('error')}"
    if e.kind == "in_doubt":
        return (
            f"intent seq {d.get('intent_seq')} ({d.get('tool')}) in doubt, policy {d.get('policy')}"
        )
    if e.kind == "resolved":
        return (
            f"{d.get('by')} resolved intent seq {d.get('intent_seq')} ({d.get('tool')}): "
            f"{d.get('action')}" + (f" - {d.get('reason')}" if d.get("reason") else "")
        )
    if e.kind == "forked":
        return f"forked from {d.get('source')} at seq {d.get('at')} by {d.get('by')}"
    if e.kind == "forked_to":
        return f"forked at seq {d.get('at')} as {d.get('fork')} by {d.get('by')}"
    return f"{e.kind}: {short(d, 160)}"


_EVENT_COLOR = {
    "recovered": "magenta",
    "quarantined": "red",
    "stopped": "red",
    "snapshot_rejected": "red",
    "resolved": "yellow",
    "in_doubt": "yellow",
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
            text = s.dim(
                f"snapshot seq {item.seq} (handled up to {item.handled_seq}, {item.size:,} B)"
            )
            if not item.valid:
                text += s.red(clean(f" INVALID: {item.problem}"))
            t.row(item.seq, item.created_at, text)
        elif isinstance(item, ops.Event):
            color: Callable[[str], str] = getattr(s, _EVENT_COLOR.get(item.kind, "bold"))
            t.row("", item.at, color(clean(f"[{item.kind}] " + _event_text(item))))
        else:
            t.row(
                item.seq,
                None,
                s.red(clean(f"DAMAGE seq {item.seq}: {item.check} check failed: {item.detail}")),
            )

    def end(self) -> None:
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
        f"{_status_text(s, a.status)}  last seq {a.last_seq}  snapshot {snap}  "
        f"pending {a.pending_messages}"
    )
    if a.problem:
        out.line(s.red(f"  {clean(a.problem)}"))
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
    t.row(
        st.message_seq,
        st.received_at,
        f"{paint(f'{mark:8}')} {label} {clean(st.message_type)} {short(st.body, 70)}{sender}",
    )
    indent = " " * 11
    items: list[tuple[int, ops.Call | ops.Effect]] = [(c.intent_seq, c) for c in st.calls]
    items += [(e.seq, e) for e in st.effects]
    for seq, item in sorted(items, key=lambda x: x[0]):
        if isinstance(item, ops.Effect):
            t.row(seq, None, s.dim(f"{indent}{clean(item.name):5} {effect_value(item)}"))
            continue
        t.row(seq, None, indent + _call_line(s, item))
        for d in item.decisions:
            what = {
                "result": f"result {short(d.value, 50)}",
                "fail": f"fail {short(d.error, 60)}",
                "retry": "retry",
                "attempt": "retry started",
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
    call = _call_text(c.tool, c.args, c.kwargs)
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
    extra = f"  key {clean(c.key)}" if c.effect == "write" else ""
    if c.recorded_key is not None:
        extra += f" (the copied intent says {clean(c.recorded_key)})"
    if c.attempts > 1:
        extra += f"  attempt {c.attempts}"
    return f"{kind} {call}  {outcome}" + s.dim(extra)


_ITEM_TYPE: dict[type, str] = {
    ops.ActorStatus: "actor",
    ops.Step: "step",
    ops.SnapshotView: "snapshot",
    ops.Event: "event",
    ops.Finding: "damage",
}


async def cmd_history(args: argparse.Namespace, out: Out) -> int:
    """Streams: the log is read in pages and each step is printed once it is complete."""
    async with (
        ops.opened(_store_url(args.store)) as store,
        contextlib.aclosing(ops.iter_history(store, args.actor, since=args.since)) as items,
    ):
        if args.html:
            from ._html import write_history

            await write_history(items, args.html, source=shown_url(args.store), since=args.since)
            print(f"wrote {clean(args.html)}", file=sys.stderr)
            return EXIT_OK
        if args.json:
            async for item in items:
                _json_line(out.stream, {"type": _ITEM_TYPE[type(item)], **ops.to_json(item)})
            return EXIT_OK
        printer = HistoryPrinter(out, shown_url(args.store), since=args.since)
        async for item in items:
            printer.item(item)
        printer.end()
    return EXIT_OK


async def cmd_show(args: argparse.Namespace, out: Out) -> int:
    async with ops.opened(_store_url(args.store)) as store:
        v = await ops.show(store, args.actor, args.seq)
    if args.json:
        _json_line(out.stream, ops.to_json(v))
        return EXIT_OK
    s = out.s
    out.line(s.bold(clean(f"{v.actor_id} seq {v.seq}: {v.kind} {v.type_tag}")))
    out.line(f"  ref         {v.ref}")
    out.line(f"  message id  {clean(v.message_id) if v.message_id is not None else '-'}")
    check = s.green("ok") if v.valid else s.red(clean(f"DAMAGED: {v.problem}"))
    out.line(f"  checksum    {v.checksum:#010x} (computed {v.computed_checksum:#010x}) {check}")
    out.line(f"  size        {v.size:,} bytes")
    at = v.payload.get("at") if isinstance(v.payload, dict) else None
    if isinstance(at, int | float):
        out.line(f"  time        {when(at)}")
    out.line("payload:")
    for line in _json_text(v.payload, indent=2).splitlines():
        out.stream.write("  " + line + "\n")  # in full, never cut
    if v.related:
        out.line("related:")
        for r in v.related:
            out.line(
                clean(f"  {r['seq']:>6}  {r['kind']:8} {r['type_tag']}  ") + s.dim(r["relation"])
            )
    return EXIT_OK


async def cmd_verify(args: argparse.Namespace, out: Out) -> int:
    progress = Progress(sys.stderr)
    try:
        async with ops.opened(_store_url(args.store)) as store:
            report = await ops.verify(store, args.actor, progress=progress)
    finally:
        progress.clear()
    if args.json:
        _json_line(
            out.stream,
            {
                "ok": report.ok,
                "actors": report.actors,
                "entries": report.entries,
                "snapshots": report.snapshots,
                "findings": ops.to_json(report.findings),
                "limits": report.limits,
            },
        )
        return EXIT_OK if report.ok else EXIT_FOUND
    s = out.s
    summary = (
        f"checked {report.actors} actor(s), {report.entries:,} entries, "
        f"{report.snapshots} snapshot(s)"
    )
    if report.ok:
        out.line(s.green("ok") + f": {summary}; no damage found")
        for limit in report.limits:  # what no check of the rows can see (SQLite's own files)
            out.line(s.dim(f"note: {limit}"))
        return EXIT_OK
    out.line(s.red(f"DAMAGE: {len(report.findings)} problem(s)") + f" ({summary})")
    for f in report.findings:
        where = {
            "entry": f"seq {f.seq}",
            "snapshot": f"snapshot seq {f.seq}",
            "actor": "summary row",
        }[f.where]
        out.line(clean(f"  {f.actor_id} {where}: {f.check} check failed: {f.detail}"))
    out.line(
        s.dim(
            "Damaged actors are quarantined by the runtime; nothing is cut or rewritten "
            "automatically. See docs/operators.md."
        )
    )
    for limit in report.limits:
        out.line(s.dim(f"note: {limit}"))
    return EXIT_FOUND


async def cmd_resolve(args: argparse.Namespace, out: Out) -> int:
    kwargs: dict[str, Any] = {}
    if args.result is not None:
        try:
            kwargs["result"] = json.loads(args.result)
        except ValueError as exc:
            raise UsageError(
                f"--result must be JSON ({exc}); for a string, quote it: --result '\"PAGE-1\"'"
            ) from None
    elif args.retry:
        kwargs["retry"] = True
    else:
        kwargs["fail"] = args.fail
    async with ops.opened(_store_url(args.store), read_only=False) as store:
        d = await ops.resolve(
            store, args.actor, args.intent_seq, by=args.by, reason=args.reason or "", **kwargs
        )
    what = {
        "result": f"result {short(d.value, 60)}",
        "retry": "retry",
        "fail": f"fail ({short(d.error, 60)})",
    }[d.action]
    out.line(
        f"recorded decision seq {d.seq} on intent seq {args.intent_seq} of "
        f"{args.actor}: {what}, by {d.by}" + (f", because {d.reason}" if d.reason else "")
    )
    out.line(
        out.s.dim(
            "The actor continues when a runtime next recovers it (on start, since it "
            "has unfinished work). A runtime running it right now will not see this "
            "decision until it restarts."
        )
    )
    return EXIT_OK


def _print_effects(out: Out, effects: Sequence[ops.ExternalEffect], at: int) -> None:
    s = out.s
    out.line(
        s.yellow(
            f"{len(effects)} external write effect(s) after seq {at} already happened "
            "(or may have) in the original run:"
        )
    )
    for e in effects:
        text = (
            _call_text(e.name, e.args, e.kwargs)
            if e.kind == "tool"
            else f"send {short(e.args[0] if e.args else None)} to {e.name}"
        )
        again = "  (the fork will run it again)" if e.repeated_by_fork else ""
        out.line(
            f"  seq {e.seq:>6}  step {e.step_seq:>6}  {text}  {e.outcome}"
            + (f"  key {e.key}" if e.key else "")
            + s.yellow(again)
        )


async def cmd_fork(args: argparse.Namespace, out: Out) -> int:
    async with ops.opened(_store_url(args.store), read_only=False) as store:
        try:
            r = await ops.fork(
                store, args.actor, at=args.at, new_id=args.new_id, yes=args.yes, by=args.by
            )
        except ops.ForkRefusedError as exc:
            _print_effects(out, exc.effects, exc.at)
            for w in exc.warnings:
                out.line(out.s.red(f"  could not read: {w}"))
            print(
                f"actorlog: refused: {len(exc.effects)} external effect(s) after seq {exc.at} "
                "already happened (or may have) in the original run, and forking cannot undo "
                "them; review the list above and re-run with --yes to fork anyway",
                file=sys.stderr,
            )
            return EXIT_FOUND
    if r.effects:
        _print_effects(out, r.effects, r.at)
    snap = f"snapshot seq {r.snapshot_seq} copied" if r.snapshot_seq else "no snapshot to copy"
    out.line(
        f"forked {r.source_id} at seq {r.at} as {out.s.bold(r.actor_id)}: "
        f"{r.entries_copied} entries copied, {snap}"
    )
    out.line(out.s.dim(f"Run it with system.spawn(<its class>, {r.actor_id!r})."))
    return EXIT_OK


async def cmd_export(args: argparse.Namespace, out: Out) -> int:
    stream: TextIO = out.stream
    f = None
    if args.output and args.output != "-":
        f = open(args.output, "w", encoding="utf-8")  # noqa: ASYNC230,SIM115  # local file, closed below
        stream = f
    try:
        async with (
            ops.opened(_store_url(args.store)) as store,
            contextlib.aclosing(ops.export(store, args.actor, raw=args.raw)) as items,
        ):
            async for item in items:
                _json_line(stream, item)
    finally:
        if f is not None:
            f.close()
    return EXIT_OK


class UsageError(Exception):
    """Bad command-line input that argparse could not catch."""


# -- parser ------------------------------------------------------------------------------


def _nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {v}")
    return v


def _pos_int(text: str) -> int:
    v = _nonneg_int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for errors"
    )
    common.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default=argparse.SUPPRESS,
        help="color output (default: auto, only on a terminal, not with NO_COLOR)",
    )

    p = argparse.ArgumentParser(
        prog="actorlog",
        description="Inspect and operate actorlog stores: actors, history, verify, resolve "
        "in-doubt tool calls, fork, export.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"actorlog {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    p.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="color output (default: auto, only on a terminal, not with NO_COLOR)",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def add(
        name: str, help: str, fn: Callable[..., Awaitable[int]], description: str = ""
    ) -> argparse.ArgumentParser:
        sp = sub.add_parser(
            name,
            help=help,
            description=description or help,
            parents=[common],
            epilog=_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sp.set_defaults(fn=fn)
        sp.add_argument("store", metavar="STORE", help="store URL or SQLite file path")
        return sp

    sp = add(
        "actors",
        "list actors with status, last seq, snapshot, pending and in-doubt calls",
        cmd_actors,
        "List every actor: type, status (idle, running, in_doubt, quarantined, "
        "failed), last seq, last snapshot seq and age, pending messages, and tool calls "
        "in doubt.",
    )
    sp.add_argument("--json", action="store_true", help="one JSON object per line")

    sp = add(
        "history",
        "an actor's timeline: steps, tool calls, replies, snapshots, recoveries",
        cmd_history,
        "Show one actor's timeline: each step with its message, tool calls "
        "(intent, result, idempotency key, duration), reply or error; snapshots; "
        "recoveries, operator decisions and damage found.",
    )
    sp.add_argument("actor", metavar="ACTOR", help="actor id")
    sp.add_argument(
        "--since",
        type=_nonneg_int,
        default=0,
        metavar="SEQ",
        help="only steps after this seq (and those in progress at it)",
    )
    fmt = sp.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="complete, as JSON lines")
    fmt.add_argument(
        "--html", metavar="FILE", help="write a self-contained HTML timeline (no network resources)"
    )

    sp = add("show", "one log entry in full, decoded, with its checksum checked", cmd_show)
    sp.add_argument("actor", metavar="ACTOR", help="actor id")
    sp.add_argument("seq", metavar="SEQ", type=_pos_int, help="entry seq")
    sp.add_argument("--json", action="store_true", help="as JSON")

    sp = add(
        "verify",
        "check every checksum, seq chain and snapshot digest",
        cmd_verify,
        "Scan every entry's checksum, the seq chains, references between entries and "
        "every snapshot's digest. Exit 0 clean, 1 damage found, 2 could not read.",
    )
    sp.add_argument("actor", metavar="ACTOR", nargs="?", help="only this actor")
    sp.add_argument("--json", action="store_true", help="the report as JSON")

    sp = add(
        "resolve",
        "settle an in-doubt tool call (recorded as an operator decision)",
        cmd_resolve,
        "Settle a tool call that may or may not have happened (an intent with no result "
        "whose tool escalates). The decision (who, when, why) is appended to the actor's "
        "log; the actor continues when a runtime next recovers it.",
    )
    sp.add_argument("actor", metavar="ACTOR", help="actor id")
    sp.add_argument(
        "intent_seq",
        metavar="INTENT_SEQ",
        type=_pos_int,
        help="seq of the in-doubt intent (see 'actorlog actors' or 'history')",
    )
    how = sp.add_mutually_exclusive_group(required=True)
    how.add_argument(
        "--result",
        metavar="JSON",
        help="it happened and returned this JSON value (e.g. '\"PAGE-1\"')",
    )
    how.add_argument("--retry", action="store_true", help="run it again, once")
    how.add_argument(
        "--fail",
        metavar="MESSAGE",
        help="it did not happen: the handler's ctx.call raises ToolCallError",
    )
    sp.add_argument("--reason", metavar="TEXT", help="why (recorded in the log)")
    sp.add_argument("--by", metavar="WHO", help="who decides (default: user@host)")

    sp = add(
        "fork",
        "a new actor starting from an actor's state as of SEQ",
        cmd_fork,
        "Create NEW_ID as ACTOR would be had it crashed right after entry SEQ: entries "
        "1..SEQ are copied with fresh checksums, plus the newest snapshot at or before "
        "SEQ. External write effects after SEQ that already happened in the original run "
        "are listed first; without --yes the fork is refused when there are any.",
    )
    sp.add_argument("actor", metavar="ACTOR", help="actor id to fork")
    sp.add_argument("--at", type=_pos_int, required=True, metavar="SEQ", help="fork point")
    sp.add_argument("--as", dest="new_id", required=True, metavar="NEW_ID", help="the new id")
    sp.add_argument(
        "--yes",
        action="store_true",
        help="fork even though external effects after SEQ already happened",
    )
    sp.add_argument("--by", metavar="WHO", help="who forks (default: user@host)")

    # -- ownership (docs/scaling.md) ----------------------------------------------------
    sp = add(
        "leases",
        "who owns each actor: owner, fencing token, lease expiry (PostgreSQL)",
        cmd_leases,
        "List every actor's lease in a store shared by several runtimes: the runtime that "
        "owns it (its owner= name), the fencing token, and the seconds until the lease "
        "expires (negative: expired, free to take). Stores without leases have none.",
    )
    sp.add_argument("--json", action="store_true", help="one JSON object per line")

    sp = add("export", "an actor's whole log, snapshots and history as JSON lines", cmd_export)
    sp.add_argument("actor", metavar="ACTOR", help="actor id")
    sp.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    sp.add_argument(
        "--raw", action="store_true", help="also include every payload's exact bytes (base64)"
    )
    return p


# -- main --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """The console script. Returns (and exits with) the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    out = Out(Style(_use_color(args.color, sys.stdout)), sys.stdout)
    try:
        code: int = anyio.run(args.fn, args, out, backend="asyncio")
        sys.stdout.flush()
    except KeyboardInterrupt:
        print("actorlog: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (| head): silence the flush at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FOUND
    except (ActorlogError, UsageError, OSError) as exc:
        if args.debug:
            raise
        print(f"actorlog: error: {clean(_message(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        if args.debug:
            raise
        print(
            f"actorlog: internal error: {type(exc).__name__}: {clean(exc)} (run with --debug "
            "for the "
            "traceback, and please report it)",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return code


def _message(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    cause = exc.__cause__
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror}: {exc.filename}"
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({cause})"
    return text


if __name__ == "__main__":
    sys.exit(main())
