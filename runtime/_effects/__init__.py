"""What a handler is given and does: ``Actor`` and ``ActorRef``, the type registry, ``Context`` and
every effect it logs first: ``ctx.call`` with its tools, retries and attempts (``tools``,
``retry``, ``calls``, ``cancelling``, ``cancelwrite``), the durable waits (``ctxtimers``), the
tasks of a step and their replay order (``tasks``, ``ctxtasks``, ``sequencer``), and what a step
needs of its actor (``stephost``, a Protocol). May import the journal layer, ``_tracing`` and
``_durability``.
"""
