"""Terminal and value formatting shared by the ``actorlog`` command and its HTML timeline:
escaping what a store holds, colors, times, durations, short values, JSON text, and the
one-line text of an operator-history event."""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import shutil
import time
from typing import TYPE_CHECKING, Any, TextIO

from .. import ops
from .._journal.records import EventKind

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


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


def use_color(choice: str, stream: TextIO) -> bool:
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return stream.isatty()


STATUS_COLOR = {
    "idle": "green",
    "running": "blue",
    "in_doubt": "yellow",
    "quarantined": "red",
    "stopped": "red",
    "finished": "dim",
    "terminated": "magenta",
}


def status_text(s: Style, status: str) -> str:
    color: Callable[[str], str] = getattr(s, STATUS_COLOR.get(status, "bold"))
    return color(status)


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


def call_text(tool: str, args: Sequence[Any], kwargs: dict[str, Any], limit: int = 60) -> str:
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


def effect_value(e: ops.Effect, *, waiting: bool = False) -> str:
    """An effect in words. ``waiting``: it is the last thing of a step still in progress
    (a ``sleep`` there is the wait the step is in)."""
    if e.name in ("sleep", "send_later") and isinstance(e.value, dict):
        return _timer_effect(e.name, e.value, waiting)
    if e.name == "finish":  # ctx.stop()
        reason = e.value.get("reason") if isinstance(e.value, dict) else None
        return "the actor finishes with this step" + (f": {str(reason)[:80]}" if reason else "")
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


def _timer_effect(name: str, v: dict[str, Any], waiting: bool) -> str:
    """``ctx.sleep`` (its wake time) and ``ctx.send_later`` (what, to whom, when, the id)."""
    if name == "sleep":
        until = v.get("until")
        if not isinstance(until, int | float):
            return short(v, 70)
        if not waiting:
            return f"slept until {when(until)}"
        left = until - time.time()
        rest = f"{left:.0f}s left" if left > 0 else "its time passed: resumes at once"
        return f"sleeps until {when(until)} ({rest})"
    due = v.get("due")
    at = when(due) if isinstance(due, int | float) else clean(due)
    return (
        f"send {clean(v.get('message_type'))} to {clean(v.get('target'))} at {at}, "
        f"timer id {clean(v.get('timer_id'))}"
    )


def message_origin(message_id: str | None) -> str | None:
    """What sent a message the runtime's timer loop delivered, by its id: a ``send_later``
    timer (``timer:<timer id>``) or a schedule's firing (``schedule:<name>@<time>``)."""
    if message_id is None:
        return None
    if message_id.startswith("timer:"):
        return f"timer {clean(message_id[6:])} fired"
    if message_id.startswith("schedule:") and "@" in message_id:
        name, _, at = message_id[9:].rpartition("@")
        return f"schedule {clean(name)} fired (firing of {clean(at)})"
    return None


def task_text(task: str | None) -> str:
    """Which task of a step made a call or effect (``Call.task``): ``handler`` (the handler's
    own task) or ``task 1.0`` (its spawn path)."""
    return "handler" if task is None else f"task {clean(task)}"


def clock(ts: float | None) -> str:
    """A time of day to the millisecond (``14:03:07.250``), for when calls ran."""
    if ts is None:
        return "-"
    try:
        return datetime.datetime.fromtimestamp(ts).astimezone().strftime("%H:%M:%S.%f")[:12]
    except (OverflowError, OSError, ValueError, TypeError):  # damage: NaN, inf, out of range
        return f"DAMAGED time {clean(ts)}"


def cancelled_doubt_text(c: ops.Call) -> str:
    """What a write cancelled by its handler while it ran left to know (docs/retries.md,
    "Cancelled while running"), or "" for any other call. The one wording of ``actorlog
    history``, its HTML export and the console."""
    if c.reconciled == "happened":
        return f"reconciled: it happened -> {short(c.reconciled_value, 50)}"
    if c.reconciled == "not_happened":
        return "reconciled: it did not happen"
    if not c.in_doubt:
        return ""
    r = c.ruling
    if r is None:
        return "in doubt: needs a ruling (actorlog resolve --result | --fail)"
    if r.action == "result":
        return f"ruled by {clean(r.by)}: it happened -> {short(r.value, 50)}"
    return f"ruled by {clean(r.by)}: it did not happen"


def concurrency_text(c: ops.Call) -> str:
    """A call of a concurrent step (``Step.concurrent``): which task made it, when it ran,
    and the calls it overlapped, e.g. ``task 0; ran 14:03:07.250 to 14:03:07.351; parallel
    with #5, #7`` (``#5``: the call whose intent is seq 5; past :data:`PARALLEL_SHOWN`
    of them, ``and N more``). The one wording of ``actorlog history``, its HTML export and
    the console."""
    if c.result_seq is None:
        ran = f"started {clock(c.at)}, no outcome yet"
    else:
        ran = f"ran {clock(c.at)} to {clock(c.ended_at)}"
    text = f"{task_text(c.task)}; {ran}"
    if c.parallel_with:
        text += "; parallel with " + ", ".join(f"#{n}" for n in shown_parallel(c))
        if len(c.parallel_with) > PARALLEL_SHOWN:
            text += f" and {len(c.parallel_with) - PARALLEL_SHOWN} more"
    return text


def waiting_in(st: ops.Step) -> set[int]:
    """The seqs of what a step in progress waits in now: the last entry (call or effect) of
    each of its tasks (one task: the step's last entry). Empty for a finished step."""
    if st.step_seq is not None:
        return set()
    last: dict[str | None, int] = {}
    for seq, task in [(c.intent_seq, c.task) for c in st.calls] + [
        (e.seq, e.task) for e in st.effects
    ]:
        last[task] = max(seq, last.get(task, 0))
    return set(last.values())


#: the most overlapping calls named under one call (a wide fan-out would make every line,
#: and the console's pages, grow with the square of its width)
PARALLEL_SHOWN = 8


def shown_parallel(c: ops.Call) -> list[int]:
    """The intent seqs of the calls ``c`` overlapped that are named: the first
    :data:`PARALLEL_SHOWN` (``Call.parallel_with`` has them all)."""
    return c.parallel_with[:PARALLEL_SHOWN]


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


def json_text(obj: Any, **kwargs: Any) -> str:
    """Strict JSON (never NaN or Infinity), safe to print on a terminal."""
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, default=str, **kwargs)
    except ValueError:
        text = json.dumps(_finite(obj), ensure_ascii=False, allow_nan=False, default=str, **kwargs)
    return _json_safe_text(text)


def json_line(stream: TextIO, obj: Any) -> None:
    stream.write(json_text(obj, separators=(",", ":")) + "\n")


def in_doubt_text(a: ops.ActorStatus) -> str:
    """An actor's tool calls without an outcome, as ``actorlog actors`` and the console's
    overview show them: ``19 page_oncall`` (waits for an operator), ``21 send_mail (auto)``
    (the runtime settles it on recovery), or ``-`` for none."""
    return (
        ", ".join(
            f"{i.intent_seq} {clean(i.tool)}" + ("" if i.needs_operator else f" ({i.state})")
            for i in a.in_doubt
        )
        or "-"
    )


def attempt_failed_text(d: ops.Decision) -> str:
    """A failed attempt of a tool's retry policy (an ``attempt_failed`` decision), in words."""
    err = d.error or {}
    text = f"attempt {d.attempt} failed: {err.get('type', '?')}: {short(err.get('message'), 80)}"
    if d.in_doubt:
        text += " (in doubt: the tool's in-doubt policy runs first)"
    return f"{text}; next attempt after {d.delay or 0:.3g}s"


def event_text(e: ops.Event) -> str:
    d = e.detail
    if e.kind == EventKind.RECOVERED:
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
    if e.kind == EventKind.SNAPSHOT_REJECTED:
        return f"snapshot seq {d.get('seq')} rejected: {d.get('reason')}"
    if e.kind == EventKind.SNAPSHOT:
        size = d.get("bytes")
        return (
            f"snapshot seq {d.get('seq')} written ({d.get('trigger')}"
            + (f", {size:,} B" if isinstance(size, int) else "")
            + f", recovery estimate before it {duration(d.get('recovery_estimate'))})"
        )
    if e.kind in (EventKind.QUARANTINED, EventKind.STOPPED):
        etype = f"{d['error_type']}: " if d.get("error_type") else ""
        return f"{e.kind}: {etype}{d.get('error')}"
    if e.kind == EventKind.IN_DOUBT:
        return (
            f"intent seq {d.get('intent_seq')} ({d.get('tool')}) in doubt, policy {d.get('policy')}"
        )
    if e.kind == EventKind.RESOLVED:
        return (
            f"{d.get('by')} resolved intent seq {d.get('intent_seq')} ({d.get('tool')}): "
            f"{d.get('action')}" + (f" - {d.get('reason')}" if d.get("reason") else "")
        )
    if e.kind == EventKind.FORKED:
        return f"forked from {d.get('source')} at seq {d.get('at')} by {d.get('by')}"
    if e.kind in _ENDING:
        return _ending_text(e)
    if e.kind == EventKind.FORKED_TO:
        return f"forked at seq {d.get('at')} as {d.get('fork')} by {d.get('by')}"
    return f"{e.kind}: {short(d, 160)}"


_ENDING = (
    EventKind.FINISHED,
    EventKind.TERMINATED,
    EventKind.CANCEL_REQUESTED,
    EventKind.CANCELLED,
)


def _ending_text(e: ops.Event) -> str:
    """The lifecycle events (``_lifecycle``): finished, terminated, cancel asked, cancelled."""
    d = e.detail
    why = f": {d.get('reason')}" if d.get("reason") else ""
    by = f" by {d.get('by')}" if d.get("by") else ""
    if e.kind == EventKind.FINISHED:
        return f"finished (ctx.stop in step seq {d.get('seq')}){why}"
    if e.kind == EventKind.TERMINATED:
        return f"terminated{by}{why}; no more steps"
    if e.kind == EventKind.CANCEL_REQUESTED:
        return f"cancel of the running step requested{by}{why}"
    calls = d.get("calls") or []
    cut = f"; cut short: {', '.join(str(c) for c in calls)}" if calls else ""
    return f"step seq {d.get('seq')} cancelled{by}{why}{cut}"
