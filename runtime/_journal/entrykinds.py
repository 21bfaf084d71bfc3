"""The names the log and the operator history use: entry kinds ([F4]), event kinds, decision
actions and how a result was settled. ``StrEnum``: stores, JSON and the wire see the plain
strings, and a member compares equal to its string."""

from __future__ import annotations

import enum

__all__ = ["DecisionAction", "EntryKind", "EventKind", "SettledBy"]


class EntryKind(enum.StrEnum):
    """[F4] The kind of a log entry (``EntryRow.kind``); ``actorlog.store.KINDS`` in order."""

    MESSAGE = "message"
    INTENT = "intent"
    RESULT = "result"
    STEP = "step"
    EFFECT = "effect"
    DECISION = "decision"


class EventKind(enum.StrEnum):
    """The kind of an operator-history event (``EventRow.kind``; detail is a JSON object)."""

    #: the spawn options saved with an actor (detail: the options)
    OPTIONS = "options"
    #: a runtime recovered the actor (detail: snapshot_seq, entries_read, steps_replayed, ...)
    RECOVERED = "recovered"
    #: damage or an unregistered class stopped it until an operator acts (error_type, error)
    QUARANTINED = "quarantined"
    #: a store failure or a conflict stopped it (error_type, error)
    STOPPED = "stopped"
    #: an operator restarted it after a quarantine (by, reason, error: why it was)
    RESTARTED = "restarted"
    #: recovery did not use a snapshot (seq, reason)
    SNAPSHOT_REJECTED = "snapshot_rejected"
    #: a snapshot was written (seq, trigger, bytes, recovery_estimate): counts every snapshot,
    #: also those later deleted beyond ``snapshot_keep``
    SNAPSHOT = "snapshot"
    #: writing a snapshot failed (seq, error)
    SNAPSHOT_FAILED = "snapshot_failed"
    #: a tool call waits for an operator (intent_seq, tool, policy)
    IN_DOUBT = "in_doubt"
    #: a tool's reconcile function raised (intent_seq, error)
    RECONCILE_FAILED = "reconcile_failed"
    #: an operator decided an intent (intent_seq, decision_seq, action, tool, by, reason, offline)
    RESOLVED = "resolved"
    #: this actor is a fork (source, at, fork, by, external_effects, confirmed)
    FORKED = "forked"
    #: this actor was forked (the same detail, on the source)
    FORKED_TO = "forked_to"
    #: the start of its log was removed (first_seq, removed, retention, stopped_by, by)
    COMPACTED = "compacted"
    #: the actor finished: ``ctx.stop()`` in the step of message ``seq`` (seq, reason)
    FINISHED = "finished"
    #: an operator terminated the actor: no more steps (by, reason)
    TERMINATED = "terminated"
    #: an operator asked to cancel the running step (by, reason); acted on by the owner
    CANCEL_REQUESTED = "cancel_requested"
    #: a step was cancelled by an operator (seq, by, reason, calls: the calls it cut short)
    CANCELLED = "cancelled"
    #: written by nobody: what a store returns for an event row it cannot read (detail: error)
    DAMAGED = "damaged"


class DecisionAction(enum.StrEnum):
    """[F4] The type tag (and ``action``) of a ``decision`` entry."""

    RESULT = "result"
    RETRY = "retry"
    FAIL = "fail"
    #: written by the runtime right before it runs an authorized retry, or the next attempt
    #: of a tool's retry policy
    ATTEMPT = "attempt"
    #: written by the runtime when an attempt failed and its retry policy runs another one
    #: after ``delay`` seconds (since format 1, actorlog 0.1: older readers escalate it)
    ATTEMPT_FAILED = "attempt_failed"


class SettledBy(enum.StrEnum):
    """[F5] ``settled_by`` of a ``result`` entry."""

    RUN = "run"
    RECONCILE = "reconcile"
    CANCELLED = "cancelled"
