"""The exception tree: every error actorlog raises is an :class:`ActorlogError`. The tree,
with what each error means, is documented once, in :mod:`actorlog.errors` (the public
module that re-exports these classes).

Errors carry their fields as attributes and build their message in ``__init__``.
"""

from __future__ import annotations

import datetime

__all__ = [
    "AlreadyDecidedError",
    "ActorFinishedError",
    "ActorNotFoundError",
    "ActorQuarantinedError",
    "ActorStoppedError",
    "ActorlogError",
    "ConfigurationError",
    "CorruptEntryError",
    "EncodeError",
    "HandlerError",
    "InDoubtError",
    "LogCompactedError",
    "NonDeterminismError",
    "ReadOnlyQueryError",
    "RecoveryError",
    "SequenceConflictError",
    "SnapshotError",
    "StepCancelledError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreURLError",
    "StoreUnavailableError",
    "ToolCallError",
    "ToolTimeoutError",
    "ToolCalledDirectlyError",
    "TornTailError",
    "UnstableNameWarning",
    "UnsupportedFormatError",
    "WALError",
]


class ActorlogError(Exception):
    """Root of every error actorlog raises."""


class ConfigurationError(ActorlogError, ValueError):
    """An actorlog call got arguments it cannot use. Nothing was written."""


class EncodeError(ConfigurationError, TypeError):
    """A value cannot be encoded by the codec (not attrs, or an unsupported type)."""

    def __init__(self, what: str, value_type: type | str, reason: str) -> None:
        self.what = what
        self.value_type = value_type if isinstance(value_type, str) else value_type.__qualname__
        self.reason = reason
        super().__init__(
            f"cannot encode {what} of type {self.value_type}: {reason}. "
            "Messages are attrs classes, dataclasses or pydantic models, and state is an "
            "attrs class, whose fields cattrs can unstructure to JSON (str, int, float, "
            "bool, None, lists, dicts with str keys, datetimes, nested such classes)."
        )


class ToolCalledDirectlyError(ConfigurationError):
    """A tool was awaited directly inside a handler (``await search(q)``): that would run
    it without logging it, so it is refused. Call it through ``ctx.call``."""

    def __init__(self, tool: str, where: str) -> None:
        self.tool = tool
        self.where = where
        super().__init__(
            f"tool {tool!r} was called directly inside the handler of {where}; a direct call "
            "is not logged, so a crash would repeat it and replay would run it again. Call it "
            f"through the context instead: await ctx.call({tool.rpartition('.')[2]}, ...)"
        )


class UnstableNameWarning(UserWarning):
    """A class is recorded in the log under a ``__main__.`` tag, which changes when its
    file is imported instead of run as a script. Give the class a stable ``name=``."""


def _when(at: object) -> str:
    if not isinstance(at, int | float) or at != at or at in (float("inf"), float("-inf")):
        return "an unknown time"
    try:
        return datetime.datetime.fromtimestamp(at).astimezone().isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return "an unknown time"


class AlreadyDecidedError(ConfigurationError):
    """The intent already has its one decision (or a result); nothing was written."""

    def __init__(
        self,
        actor_id: str,
        intent_seq: int,
        *,
        action: str,
        by: str,
        at: object,
        seq: int | None,
        pending: bool = False,
    ) -> None:
        self.actor_id = actor_id
        self.intent_seq = intent_seq
        self.action = action
        self.by = by
        self.at = at
        self.seq = seq
        where = f" (decision seq {seq})" if seq is not None else ""
        if pending:
            where = " (being written now)"
        what = action
        if action == "retry":
            what = "retry (authorized, not started yet: the runtime runs it on recovery)"
        super().__init__(
            f"intent seq {intent_seq} of actor {actor_id!r} already has a decision: "
            f"{what} by {by or 'unknown'} at {_when(at)}{where}. An intent takes one "
            "decision; nothing was written"
        )


class MessageIdReusedError(ConfigurationError):
    """A ``message_id`` the actor's log already holds came with a different message (another
    type, or other field values, compared in their canonical encoded form). A message id
    names one message: sending the same message again gets its recorded reply; a new
    message needs a new id. Nothing was written.

    Attributes: ``actor_id``, ``message_id``, ``seq`` (of the message logged under that
    id; None for one still queued in a PostgreSQL inbox), ``recorded_type`` and
    ``given_type`` (message type tags).
    """

    def __init__(
        self,
        actor_id: str,
        message_id: str,
        seq: int | None,
        recorded_type: str,
        given_type: str,
    ) -> None:
        self.actor_id = actor_id
        self.message_id = message_id
        self.seq = seq
        self.recorded_type = recorded_type
        self.given_type = given_type
        other = (
            f"a {given_type} with other field values"
            if given_type == recorded_type
            else f"a {given_type}"
        )
        where = f"logged at seq {seq}" if seq is not None else "queued in its inbox"
        super().__init__(
            f"message id {message_id!r} of actor {actor_id!r} already names the "
            f"{recorded_type} {where}, not this message ({other}). A message id "
            "names one message: retry with the same message to get its recorded reply, or "
            "use a new id for a new message; nothing was written"
        )


class StoreURLError(ConfigurationError):
    """A store URL that does not parse or names an unknown scheme (or whose driver is
    not installed)."""

    def __init__(self, url: str, reason: str, *, expected: bool = True) -> None:
        self.url = url
        self.reason = reason
        forms = (
            " (expected sqlite:///relative.db, sqlite:////absolute.db, memory:// "
            "or postgresql://user@host:port/db)"
        )
        shown = repr(url if len(url) <= 200 else url[:200] + "...")  # a 100 kB URL: bounded
        super().__init__(f"cannot open store URL {shown}: {reason}{forms if expected else ''}")


class ActorNotFoundError(ActorlogError, LookupError):
    """The actor id or actor class is not known to this system."""


class ActorStoppedError(ActorlogError):
    """The actor or the system is stopped; the call was not carried out."""


class ActorFinishedError(ActorStoppedError):
    """The actor has ended (``ctx.stop()`` finished it, or an operator terminated it): it
    takes no more messages. Its log stays for audit (``actorlog history``) until deleted.

    Attributes:
        actor_id: the actor.
        how: ``"finished"`` or ``"terminated"``.
        reason: the reason it was given, if any.
    """

    def __init__(self, actor_id: str, how: str = "finished", reason: str = "") -> None:
        self.actor_id = actor_id
        self.how = how
        self.reason = reason
        why = f": {reason}" if reason else ""
        super().__init__(f"actor {actor_id!r} is {how}{why}; it takes no more messages")


class ActorQuarantinedError(ActorlogError):
    """The actor is quarantined: its log cannot be trusted until an operator acts."""

    def __init__(self, actor_id: str, reason: BaseException | str) -> None:
        self.actor_id = actor_id
        self.reason = reason
        super().__init__(f"actor {actor_id!r} is quarantined: {reason}")


class HandlerError(ActorlogError):
    """The actor's handler raised while handling a message.

    The error was recorded with the step; asking again with the same message id
    raises it again without running the handler.
    """

    def __init__(self, actor_id: str, seq: int, error_type: str, message: str) -> None:
        self.actor_id = actor_id
        self.seq = seq
        self.error_type = error_type
        self.message = message
        super().__init__(
            f"handler of actor {actor_id!r} failed on message seq {seq}: {error_type}: {message}"
        )


class StepCancelledError(HandlerError):
    """An operator cancelled the step of this message (``system.cancel`` or ``actorlog
    cancel``). The cancellation is recorded as the step's outcome; a re-ask raises it again.
    A tool call it interrupted is recorded as cancelled (and, for a write tool, in doubt)."""


class ToolCallError(ActorlogError):
    """A tool raised. Raised by ``ctx.call`` live and, identically, on replay."""

    def __init__(self, tool: str, error_type: str, message: str) -> None:
        self.tool = tool
        self.error_type = error_type
        self.message = message
        super().__init__(f"tool {tool!r} failed: {error_type}: {message}")


class ToolTimeoutError(ActorlogError, TimeoutError):
    """A tool attempt ran longer than its ``timeout`` and was cancelled. It is the recorded
    error of that attempt (``ToolCallError.error_type == "ToolTimeoutError"``), retried by a
    ``Retry`` whose ``on`` includes ``TimeoutError`` (the default retries every error)."""

    def __init__(self, tool: str, timeout: float) -> None:
        self.tool = tool
        self.timeout = timeout
        super().__init__(f"tool {tool!r} did not finish within its timeout of {timeout:g}s")


class NonDeterminismError(ActorlogError):
    """The handler asked for a different effect than the log recorded at that position.

    The actor is quarantined; nothing was called. To recover, make the handler take the
    recorded path for steps recorded by the old code (a version gate, ``ctx.version`` or
    ``ctx.patched``, docs/upgrading.md), check it with ``actorlog replay-check``, deploy,
    then ``system.restart(actor_id)`` (or ``actorlog restart STORE ACTOR``).
    """

    def __init__(
        self, actor_id: str, step_seq: int, index: int, expected: str, got: str, task: str = ""
    ) -> None:
        self.actor_id = actor_id
        self.step_seq = step_seq
        #: the effect's number within its task
        self.index = index
        #: [F18] the task of the step that asked for it: "" is the handler's own task
        self.task = task
        self.expected = expected
        self.got = got
        where = f"task {task}" if task else "the handler's task"
        super().__init__(
            f"non-deterministic replay of actor {actor_id!r}, step seq {step_seq}, effect "
            f"#{index} of {where}: the log recorded {expected} but the handler asked for "
            f"{got}. "
            "No tool was called. Handlers must route every effect through ctx and make the "
            "same calls for the same message and state. If the handler's code changed, gate "
            "the change with ctx.version()/ctx.patched() so recorded steps take the old path "
            "(docs/upgrading.md), check it with `actorlog replay-check`, then restart the "
            f"actor: system.restart({actor_id!r}) or `actorlog restart STORE {actor_id}`"
        )


class InDoubtError(ActorlogError):
    """The step of the message asked for waits for an operator's decision on a tool call
    that may or may not have happened (an intent with no outcome whose tool escalates).

    Raised to ``ask`` as soon as the step escalates. The message stays logged: it is handled
    once an operator decides, and asking again with the same ``message_id`` then returns
    its reply (or raises this again while it still waits).
    """

    def __init__(
        self,
        actor_id: str,
        intent_seq: int,
        tool: str,
        idempotency_key: str,
        *,
        store: str = "STORE",
        step_seq: int = 0,
    ) -> None:
        self.actor_id = actor_id
        self.intent_seq = intent_seq
        self.tool = tool
        self.idempotency_key = idempotency_key
        self.step_seq = step_seq
        step = f", in the step of message seq {step_seq}" if step_seq else ""
        super().__init__(
            f"actor {actor_id!r} waits for an operator: call to tool {tool!r} (intent seq "
            f"{intent_seq}, key {idempotency_key}{step}) may or may not have happened. "
            f"Resolve it with system.resolve({actor_id!r}, {intent_seq}, result=... | "
            f"retry=True | fail='why') or `actorlog resolve {store} {actor_id} {intent_seq} "
            "--result JSON | --retry | --fail WHY`; the message stays logged and is handled "
            "after the decision (ask again with the same message_id for its reply)"
        )


class WALError(ActorlogError):
    """The log cannot be read as valid."""


class CorruptEntryError(WALError):
    """A log entry failed a check: checksum, seq chain, or decoding."""

    def __init__(self, actor_id: str, seq: int, check: str, detail: str = "") -> None:
        self.actor_id = actor_id
        self.seq = seq
        self.check = check
        self.detail = detail
        super().__init__(
            f"corrupt log entry: actor {actor_id!r} seq {seq} failed the {check} check"
            + (f" ({detail})" if detail else "")
        )


class TornTailError(WALError):
    """The last entry of a log in a store whose writes can tear was never completed."""

    def __init__(self, actor_id: str, seq: int) -> None:
        self.actor_id = actor_id
        self.seq = seq
        super().__init__(f"torn last entry for actor {actor_id!r} at seq {seq}")


class UnsupportedFormatError(WALError):
    """The store was written by a format version this code does not read."""

    def __init__(self, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            f"store format version {found} is newer than this actorlog reads "
            f"(<= {supported}); upgrade actorlog to open it. Nothing was changed."
        )


class LogCompactedError(WALError):
    """Recovery needs entries that were compacted away and no valid snapshot covers them."""

    def __init__(self, actor_id: str, first_seq: int) -> None:
        self.actor_id = actor_id
        self.first_seq = first_seq
        super().__init__(
            f"cannot recover actor {actor_id!r}: no valid snapshot, and the log starts at "
            f"seq {first_seq} (entries before it were compacted)"
        )


class SnapshotError(ActorlogError):
    """A snapshot could not be written, or failed verification."""


class RecoveryError(ActorlogError):
    """Recovery of one actor failed."""

    def __init__(self, actor_id: str, seq: int, reason: str) -> None:
        self.actor_id = actor_id
        self.seq = seq
        self.reason = reason
        super().__init__(f"recovery of actor {actor_id!r} failed at seq {seq}: {reason}")


class StoreError(ActorlogError):
    """The store failed an operation."""


class StoreUnavailableError(StoreError):
    """The store could not be reached or failed an I/O call. Possibly transient."""


class StoreClosedError(StoreError):
    """The store is closed."""


class StoreCorruptError(StoreError):
    """The database engine reports the store's file as damaged ("database disk image is
    malformed", "file is not a database", a foreign text encoding), or the store's own
    metadata is (a version that is not a number): the damage is below the rows, where the
    log's own checks cannot see. ``path`` names the file (or the PostgreSQL URL, redacted).
    Nothing was changed."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"the store {path} is damaged below the log ({reason}); actorlog cannot read "
            "it as it is and changed nothing. Keep a copy of it, then restore the last "
            "backup (docs/recovery.md, 'Backups and the SQLite files')"
        )


class StoreLockedError(StoreError):
    """Another runtime (or an offline writer such as ``actorlog resolve``) holds the SQLite
    file's writer lock: one writer per SQLite file (docs/service.md, docs/operators.md)."""

    def __init__(self, path: str, holder: str) -> None:
        self.path = path
        self.holder = holder
        super().__init__(
            f"SQLite store {path} is in use by another writer ({holder}); one runtime per "
            "SQLite file. Stop that runtime first, or do this through it (for an in-doubt "
            "call: system.resolve(...) in that process). Read-only tools (actorlog actors, "
            "history, verify) work meanwhile."
        )


class SequenceConflictError(StoreError):
    """A conditional append lost: the log's last seq was not the one the writer expected."""

    def __init__(self, actor_id: str, expected: int, found: int | None) -> None:
        self.actor_id = actor_id
        self.expected = expected
        self.found = found
        super().__init__(
            f"conflicting append to actor {actor_id!r}: expected last seq {expected}, "
            f"found {found if found is not None else 'unknown'}; another runtime is writing "
            "this actor's log, so this runtime stops it"
        )


class LeaseLostError(SequenceConflictError):
    """The database rejected an append carrying this runtime's fencing token: another runtime
    took over the actor's lease (this one paused, was partitioned or failed to renew in time).
    Nothing was written; this runtime stops the actor and leaves it to its new owner."""

    def __init__(self, actor_id: str, token: int | None, current: int | None) -> None:
        StoreError.__init__(
            self,
            f"lease lost for actor {actor_id!r}: this runtime's fencing token is {token}, the "
            f"actor's current token is {current if current is not None else 'unknown'}; "
            "another runtime owns it now, so this runtime stops it (nothing was written)",
        )
        self.actor_id = actor_id
        self.expected = -1
        self.found = None
        self.token = token
        self.current = current


class ReadOnlyQueryError(ActorlogError):
    """A query (``ActorRef.query``) tried to act or to change the state: queries are
    read-only. Nothing was logged and the actor's state is unchanged (a query runs on a
    copy of it)."""

    def __init__(self, where: str, what: str) -> None:
        self.where = where
        self.what = what
        super().__init__(
            f"the query of {where} {what}; a query may only read the state. Make changes and "
            "effects in receive(), through a message (ref.ask)"
        )
