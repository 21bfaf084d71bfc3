"""Durability: one actor's log at run time and what keeps it true. The append-before-execute
journal (``wal``, ``seenids``), the envelopes and reply slots of its mailbox (``mailbox``),
logged messages and their retries (``logged``, ``reuse``, ``incarnation``), in-doubt intents and
the one decision that settles each (``decisions``, ``attempts``, ``escalation``), snapshots and
retention (``snapshots``, ``retention``), how an actor ends (``lifecycle``) and durable timers
(``timers``). May import the journal layer and ``_tracing``; never the actor core above it.
"""
