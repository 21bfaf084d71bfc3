"""Integrations of actorlog with agent frameworks (each an optional extra).

* ``actorlog.integrations.pydantic_ai``: durable pydantic-ai agents
  (``pip install actorlog[pydantic-ai]``).
"""
