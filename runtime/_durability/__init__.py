"""Durability: one actor's log at run time and what keeps it true. The append-before-execute
journal (``wal``, ``seenids``), the envelopes and reply slots of its mailbox (``mailbox``),
logged messages and their retries (``logged``, ``reuse``), the log read and verified the way
recovery reads it, writing nothing (``plan``, shared with the offline readers), in-doubt intents
and the one decision that settles each (``decisions``, ``attempts``, ``escalation``), snapshots
and retention (``snapshots``, ``retention``), how an actor ends (``lifecycle``), durable timers
(``timers``), the actor's events and the operators' rulings (``events``, ``rulings``). May
import the journal layer and ``_tracing``; never the actor core above it.
"""
