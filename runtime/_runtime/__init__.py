"""``ActorSystem`` and what it wires: spawning, the one delivery path and recovery on start
(``system``), the host its cells and its ownership see (``host``), spawn options, the
passivation policy, read-only queries and the timer API (``options``, ``passivation``,
``query``, ``systimers``). The top of the private packages: may import all of them.
"""
