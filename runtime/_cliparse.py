"""The ``actorlog`` command line: its parser (the commands themselves are in ``_cli``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

_EPILOG = """\
STORE is a store URL (sqlite:///relative.db, sqlite:////absolute.db, postgresql://...) or the
path of a SQLite file. Stores are opened read-only, except by 'resolve' and 'fork' (and the
console's writes); reading is safe while a runtime is using the store.

exit codes: 0 done; 1 verify found damage, or fork refused without --yes; 2 could not do it
(bad arguments, store unreadable, actor or entry not found, intent not in doubt).
"""


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


def build_parser(
    commands: Mapping[str, Callable[..., Awaitable[int]]],
) -> argparse.ArgumentParser:
    """The parser; ``commands`` maps each command name to the function that runs it
    (``args.fn``)."""
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

    def add(name: str, help: str, description: str = "") -> argparse.ArgumentParser:
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
        return sp

    sp = add(
        "actors",
        "list actors with status, last seq, snapshot, pending and in-doubt calls",
        "List every actor: type, status (idle, running, in_doubt, quarantined, "
        "failed), last seq, last snapshot seq and age, pending messages, and tool calls "
        "in doubt.",
    )
    sp.add_argument("--json", action="store_true", help="one JSON object per line")

    sp = add(
        "history",
        "an actor's timeline: steps, tool calls, replies, snapshots, recoveries",
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

    sp = add("show", "one log entry in full, decoded, with its checksum checked")
    sp.add_argument("actor", metavar="ACTOR", help="actor id")
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
        help="allow resolve and fork from the browser (with the token)",
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

    sp = add("export", "an actor's whole log, snapshots and history as JSON lines")
    sp.add_argument("actor", metavar="ACTOR", help="actor id")
    sp.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    sp.add_argument(
        "--raw", action="store_true", help="also include every payload's exact bytes (base64)"
    )
    return p
