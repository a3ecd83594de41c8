"""The fault suite: ``python -m reliability --mode full|quick --bootstrap HOST:PORT --seed N --out DIR``.

A program, not a unit test (like ``benchmarks/``): it runs ``parka ingest`` workers and
``parka spark-ingest`` drivers as real processes against a real broker, kills them at seeded
points of the commit protocol, restarts a broker of its own, lets other writers commit to the
same tables, sends bad inputs, and checks at the end that every record produced is in its
table exactly once, every bad message has its answer, and no orphan file is left. ``make
reliability`` runs the full mode, ``make reliability-quick`` (part of ``make test``) the quick one.

Scenarios (one module each): :mod:`.bad_inputs` (each bad input, with and without a dead-letter
table), :mod:`.ingest_chaos` (``parka ingest`` workers joining, leaving and killed while a
producer keeps producing, another writer on the table; on Delta and on Iceberg tables, read
through :mod:`.tables`), :mod:`.evolution_chaos` (the producer's schema evolving meanwhile), :mod:`.upsert_chaos`
(``parka ingest --upsert`` workers killed around their upsert commits while keyed updates and
tombstones keep coming, the table checked against the latest row per key), :mod:`.history_chaos`
(full mode: a Delta table's retention of seconds, VACUUM and checkpoints all the time, and a reader
pinned to the versions inside the retention),
:mod:`.spark_chaos` (Spark raw mode's driver killed at its commit points),
:mod:`.broker_chaos` (a broker restarted mid-ingest and mid-produce). :mod:`.suite` runs them
and writes the summary.
"""
