"""Benchmarks for actorlog. Run each as ``python -m benchmarks.<name>``.

Every benchmark prints its figures and writes them as Markdown under ``docs/benchmarks/``
together with the machine, the versions and the exact command. Benchmarks measure; they never
assert timings.
"""
