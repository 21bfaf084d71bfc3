"""The ``actorlog`` command line: its parser (the commands themselves are in ``_cli``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

_EPILOG = """\
STORE is a store URL (sqlite:///relative.db, sqlite:////absolute.db, postgresql://...) or the
path of a SQLite file. Stores are opened read-only, except by 'resolve' and 'fork' (and the
console's writes, and 'cancel', 'terminate', 'delete'); reading is safe while a runtime is
using the store. Writes to a SQLite file work only while no runtime runs on it; on PostgreSQL
they work live.

exit codes: 0 done; 1 verify found damage, replay-check found a divergence, or fork or delete
refused without --yes/--force; 2 could not do it (bad arguments, store unreadable, actor or
entry not found, intent not in doubt, a write refused because the actor's log is damaged).
"""


def _decision_args(sp: argparse.ArgumentParser, who: str, why: str | None) -> None:
    """``--reason TEXT`` (unless ``why`` is None) and ``--by WHO``: who makes the change a
    command writes, and why; both are recorded with it (:func:`decision` reads them)."""
    if why is not None:
        sp.add_argument("--reason", metavar="TEXT", help=why)
    sp.add_argument("--by", metavar="WHO", help=f"{who} (default: user@host)")


class Decision(TypedDict):
    by: str | None
    reason: str


def decision(args: argparse.Namespace) -> Decision:
    """``by=`` and ``reason=`` for an ``ops`` write, from ``--by`` and ``--reason``."""
    return {"by": args.by, "reason": args.reason or ""}


#: the largest seq, count or port a command takes: a store's 64-bit integer
_INT_MAX = 2**63 - 1


def _nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {v}")
    if v > _INT_MAX:  # refused before anything is read (``history`` prints as it reads)
        raise argparse.ArgumentTypeError(f"must be at most {_INT_MAX} (64 bits): {v}")
    return v


def _pos_int(text: str) -> int:
    v = _nonneg_int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {v}")
    return v


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _retention_arg(text: str) -> str | float:
    """``since-snapshot`` or a window: seconds, or a number with a unit s/m/h/d."""
    if text == "since-snapshot":
        return text
    scale = _UNITS.get(text[-1:], 0.0)
    try:
        seconds = float(text[:-1] if scale else text) * (scale or 1.0)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(
            f"expected 'since-snapshot' or a window like 30d, 12h, 90m, 3600s, not {text!r}"
        )
    return seconds


def build_parser(
    commands: Mapping[str, Callable[..., Awaitable[int]]],
) -> argparse.ArgumentParser:
    """The parser; ``commands`` maps each command name to the function that runs it
    (``args.fn``)."""
    from .. import __version__

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
        name: str, help: str, description: str = "", *, actor: str | None = None
    ) -> argparse.ArgumentParser:
        """A command taking STORE, and ACTOR (with ``actor``, its help) right after it."""
        sp = sub.add_parser(
            name,
            help=help,
            description=description or help,
            parents=[common],
            epilog=_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sp.set_defaults(fn=commands[name])
        sp.add_argument("store", metavar="STORE", help="store URL or SQLite file path")
        if actor is not None:
            sp.add_argument("actor", metavar="ACTOR", help=actor)
        return sp

    sp = add(
        "actors",
        "list actors with status, last seq, snapshot, pending and in-doubt calls",
        "List every actor: type, status (idle, running, in_doubt, quarantined, "
        "failed), last seq, last snapshot seq and age, pending messages, and tool calls "
        "in doubt.",
    )
    sp.add_argument("--json", action="store_true", help="one JSON object per line")
    sp.add_argument(
        "--deleted",
        action="store_true",
        help="list the deleted actors instead (the store's audit rows: who, when, why)",
    )

    sp = add(
        "history",
        "an actor's timeline: steps, tool calls, replies, snapshots, recoveries",
        "Show one actor's timeline: each step with its message, tool calls "
        "(intent, result, idempotency key, duration), reply or error; snapshots; "
        "recoveries, operator decisions and damage found.",
        actor="actor id",
    )
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

    sp = add("show", "one log entry in full, decoded, with its checksum checked", actor="actor id")
    sp.add_argument("seq", metavar="SEQ", type=_pos_int, help="entry seq")
    sp.add_argument("--json", action="store_true", help="as JSON")

    sp = add(
        "verify",
        "check every checksum, seq chain and snapshot digest",
        "Scan every entry's checksum, the seq chains, references between entries and "
        "every snapshot's digest. Exit 0 clean, 1 damage found, 2 could not read.",
    )
    sp.add_argument("actor", metavar="ACTOR", nargs="?", help="only this actor")
    sp.add_argument("--json", action="store_true", help="the report as JSON")

    sp = add(
        "resolve",
        "settle an in-doubt tool call (recorded as an operator decision)",
        "Settle a tool call that may or may not have happened (an intent with no result "
        "whose tool escalates). The decision (who, when, why) is appended to the actor's "
        "log; the actor continues when a runtime next recovers it.",
        actor="actor id",
    )
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
    _decision_args(sp, "who decides", "why (recorded in the log)")

    sp = add(
        "fork",
        "a new actor starting from an actor's state as of SEQ",
        "Create NEW_ID as ACTOR would be had it crashed right after entry SEQ: entries "
        "1..SEQ are copied with fresh checksums, plus the newest snapshot at or before "
        "SEQ. External write effects after SEQ that already happened in the original run "
        "are listed first; without --yes the fork is refused when there are any.",
        actor="actor id to fork",
    )
    # positional like resolve's ACTOR INTENT_SEQ; --at/--as are the same, spelled as options
    sp.add_argument("seq", metavar="SEQ", type=_pos_int, nargs="?", help="fork point (or --at SEQ)")
    sp.add_argument("new_id", metavar="NEW_ID", nargs="?", help="the new id (or --as NEW_ID)")
    sp.add_argument("--at", type=_pos_int, metavar="SEQ", help="the same as SEQ")
    sp.add_argument("--as", dest="as_id", metavar="NEW_ID", help="the same as NEW_ID")
    sp.add_argument(
        "--yes",
        action="store_true",
        help="fork even though external effects after SEQ already happened",
    )
    _decision_args(sp, "who forks", None)

    sp = add(
        "compact",
        "remove the start of actors' logs that their retention lets go",
        "Compact every actor's log (or one actor's) as far as its retention allows: the one "
        "its spawn saved or its runtime compacted with (actors with none keep everything), "
        "or --retention for all actors named. Never removes what recovery, verify, history "
        "of the kept log, an in-doubt call or message-id deduplication still needs "
        "(docs/recovery.md). SQLite: only while no runtime has the file open.",
    )
    sp.add_argument("--actor", metavar="ID", help="only this actor")
    sp.add_argument(
        "--retention",
        type=_retention_arg,
        metavar="RULE",
        help="'since-snapshot', or a window such as 30d, 12h, 90m, 3600s (overrides each "
        "actor's own; recorded as your decision)",
    )
    _decision_args(sp, "who compacts", None)
    sp.add_argument("--json", action="store_true", help="one JSON object per actor")

    # -- ownership (docs/scaling.md) ----------------------------------------------------
    sp = add(
        "leases",
        "who owns each actor: owner, fencing token, lease expiry (PostgreSQL)",
        "List every actor's lease in a store shared by several runtimes: the runtime that "
        "owns it (its owner= name), the fencing token, and the seconds until the lease "
        "expires (negative: expired, free to take). Stores without leases have none.",
    )
    sp.add_argument("--json", action="store_true", help="one JSON object per line")

    sp = add(
        "timers",
        "pending, fired and cancelled timers and schedules (send_later, schedule)",
        "List the store's timers (send_later) and recurring schedules: id, addressee, "
        "message type, state (pending, fired, cancelled), next due time (UTC) and, for a "
        "schedule, its interval or cron expression and its missed-firing policy.",
    )
    sp.add_argument("--actor", metavar="ACTOR", default=None, help="only timers to this actor")
    sp.add_argument("--json", action="store_true", help="one JSON object per line")

    sp = add(
        "serve",
        "the operator console in the browser (needs: pip install 'actorlog[web]')",
        "Serve a web console over the store: every actor with its status, each actor's "
        "timeline updating live, the in-doubt queue, fork and verify. Read-only unless "
        "--allow-writes; writes need the token printed at start (or --token, or "
        "ACTORLOG_SERVE_TOKEN).",
    )
    sp.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sp.add_argument("--port", type=_pos_int, default=8470, help="port (default 8470)")
    sp.add_argument(
        "--allow-writes",
        action="store_true",
        help="allow resolve, fork, cancel, terminate and delete from the browser (with the token)",
    )
    sp.add_argument(
        "--token",
        metavar="TOKEN",
        help="the write token (default: $ACTORLOG_SERVE_TOKEN, else a new one, printed)",
    )
    sp.add_argument(
        "--trace-url",
        metavar="TEMPLATE",
        help="link each step to its trace, e.g. http://localhost:16686/trace/{trace_id}",
    )

    sp = add(
        "replay-check",
        "replay recorded histories against the current code (exit 1 on divergence)",
        "Replay every actor's recorded steps (from a store, read only, or an 'actorlog "
        "export' file) against the handler code importable now, with no tool running, and "
        "report each divergence: actor, step, what the log recorded and what the code asked "
        "for. For CI, before deploying a change to a handler (docs/upgrading.md). Exit 0: "
        "every history replays; 1: some actor diverges; 2: bad arguments, a class that does "
        "not import, or a store that cannot be read.",
    )
    sp.add_argument(
        "--actors",
        nargs="+",
        required=True,
        metavar="MODULE:CLASS",
        help="the actor classes to check (e.g. myapp.agents:Researcher)",
    )
    sp.add_argument("--messages", nargs="+", metavar="MODULE:CLASS", help="extra message classes")
    sp.add_argument("--actor", action="append", metavar="ACTOR", help="only this actor (repeat)")
    sp.add_argument("--json", action="store_true", help="the report as JSON lines")

    sp = add(
        "restart",
        "restart a quarantined actor once its cause is fixed (recorded as an event)",
        "Record that an operator restarts a quarantined actor (e.g. after fixing the "
        "handler's non-determinism). The next runtime to start it recovers it with the "
        "code it runs; a runtime running now: call system.restart(actor_id) there. Refused "
        "(exit 2, nothing recorded) if the actor is not quarantined or its log is damaged.",
        actor="actor id",
    )
    _decision_args(sp, "who restarts it", "why (recorded in the history)")
    # -- ending actors (docs/operators.md, "Ending actors") ----------------------------------
    _lifecycle_commands(add)

    sp = add(
        "export", "an actor's whole log, snapshots and history as JSON lines", actor="actor id"
    )
    sp.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    sp.add_argument(
        "--raw", action="store_true", help="also include every payload's exact bytes (base64)"
    )
    sp.add_argument(
        "--html",
        metavar="FILE",
        help="instead: the HTML timeline, the same as 'history STORE ACTOR --html FILE'",
    )
    return p


def _lifecycle_commands(add: Callable[..., argparse.ArgumentParser]) -> None:
    where = (
        " On SQLite it works offline (stop the runtime first: a running one holds the "
        "file); on PostgreSQL live, through the owning runtime's inbox."
    )
    helps = {
        "cancel": (
            "cancel an actor's running step",
            "Cancel the step the actor is running: its tool call is recorded cancelled (a "
            "write tool's as in doubt) and the step failed with StepCancelledError; the actor "
            "goes on with its next message. Without a runtime running it, the next runtime "
            "to resume its interrupted step cancels it.",
        ),
        "terminate": (
            "end an actor for good: no more steps, its log stays",
            "Terminate the actor: no more steps run (a running one is cancelled), and every "
            "message, queued ones too, gets ActorFinishedError. Its log stays for audit "
            "(history, export) until 'delete'.",
        ),
        "delete": (
            "delete an actor's log, snapshots and history (an audit row stays)",
            "Delete the actor's log, snapshots and history, leaving a store-level audit row "
            "('actors --deleted'). A finished or terminated actor needs --yes; one that has "
            "not ended needs --force (its unfinished work is lost). Refused while a runtime "
            "runs it.",
        ),
    }
    for name, (short, long) in helps.items():
        sp = add(name, short, long + where, actor="actor id")
        if name == "delete":
            sp.add_argument("--yes", action="store_true", help="confirm: delete an ended actor")
            sp.add_argument(
                "--force", action="store_true", help="delete although the actor has not ended"
            )
        _decision_args(sp, "who", "why (recorded)")
