"""Benchmarks for actorlog, installed with it as ``actorlog.benchmarks``.

Run one with ``python -m actorlog.benchmarks NAME [options]`` (``--help`` lists them; each
``NAME --help`` shows its options and their defaults, ``--quick`` a short run). From a
repository checkout ``python -m benchmarks.NAME`` works the same.

Every benchmark prints its figures; those that write a report write Markdown (and plots, with
matplotlib) to ``--out DIR`` (default ``./benchmark-results``), with the machine, the versions
and the exact command. ``--write-docs`` writes the committed reports in ``docs/benchmarks/`` of
a checkout instead. Benchmarks measure; they never assert timings.
"""
