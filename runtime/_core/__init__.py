"""One live actor: its cell (lifecycle, posts, the step loop), one step run in its ``Context``
(``step``), recovery from the newest valid snapshot and the log tail (``recovery``), the
read-only host a step is replayed on without acting (``readonly``; ``read_state`` and the replay
tester), the replay rules the three share (``replay``) and the restart of a quarantined actor
(``restart``). The cell reaches the runtime only through ``CellHost``, a Protocol it defines.
May import every package below it (the journal layer, ``_tracing``, ``_durability``,
``_effects``).
"""
