"""Ownership across runtimes (docs/scaling.md): leases and fencing, the feed of ownership changes
(``leases``; the plain ``Lease`` record is in ``_journal``), remote asks answered from the
owner's log (``remote``) and the ownership loop (``ownership``), which reaches the runtime only
through ``OwnershipHost``. May import every package below it, up to ``_core``.
"""
