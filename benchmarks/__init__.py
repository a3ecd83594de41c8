"""parka's benchmark suite: reproducible programs, never part of ``make test``.

``make bench`` (full) and ``make bench-quick`` run :mod:`benchmarks.suite`; each run writes
``results.json``, ``report.md`` and PNG plots into its output folder. Modules, one concern each:

=====================  ===============================================================
``suite``              the entry point: modes, sections, results.json
``datasets``           flights (real), web_requests and GPS telemetry (seeded synthetic)
``encodings``          JSON / Confluent Avro / parka Parquet, codecs, batch-size configs
``broker``             topics, the broker's log dir (bytes on disk, record batches)
``clients``            timed producers, messaging consumers, the raw fetch and its sinks
``lake``               into Delta: ``parka ingest``, the row baseline, table statistics
``checks``             order-independent content fingerprints; a mismatch fails the run
``measure``            CPU and wall clocks, medians and spreads, units
``matrix``             bytes/row, producer and consumer CPU per encoding and batch size
``endtoend``           per data set: ingest vs row baseline vs raw fetch, table scans
``ingest_throughput``  ingest next to its floor and the raw fetch (runs alone too)
``ingest_summary``     its variants, paired ratios and printed lines (pure)
``objectstore``        its object-store arms' root, the fetch + PUT floor's sink, clean-up
``spark``              the Spark paths, from ``benchmarks/spark_gps.py``
``readers``            the lake for its readers: files, scans vs the row baseline, optimize
``scans``              the scan query in pyarrow, DuckDB and Spark, alternating tables
``freshness``          produce-to-visible latency at fixed rates, the table it leaves
``fleet_load``         one daemon of many topics against one of a topic (runs alone)
``named_threads``      a daemon's OS threads named, its CPU by thread
``targets``            the goals, met or not, from one run's results
``machine``            cores, memory, library and broker versions
``report``, ``plots``  ``report.md`` and PNG plots from ``results.json``
=====================  ===============================================================
"""
