"""A data set's scan query over Delta tables, as three readers run it: pyarrow, DuckDB, Spark.

The query is the data set's :class:`~benchmarks.datasets.ScanQuery` (flights: ``SELECT
carrier, mean(dep_delay), sum(distance) GROUP BY carrier``). One timing covers what a reader
pays per query: open the table's current snapshot, scan the columns, aggregate, collect.

* **pyarrow**: ``DeltaTable(uri).to_pyarrow_dataset()``, ``to_table(columns)``, ``group_by``.
* **DuckDB**: ``read_parquet([...])`` over the snapshot's file URIs from deltalake
  (``DeltaTable.file_uris()``), what a DuckDB user without the ``delta`` extension does. The
  extension is downloaded from extensions.duckdb.org by ``INSTALL delta``, which this machine
  (and CI, on the same network) cannot reach. One connection for all scans of a run.
* **Spark**: ``spark.read.format("delta").load(uri)`` + ``groupBy().agg()`` + ``collect()``, in
  a child process (``python -m benchmarks.scans SPEC_JSON``) holding one Spark session
  (:func:`parka.spark_ext.session`) for all Spark scans of a run, so the JVM leaves with it.

:func:`rounds` times the tables of one engine alternately: warm-up rounds (unmeasured, every
table once: page cache, JIT), then ``repeats`` measured rounds, each scanning every table once
in a shuffled (seeded) order, so a ratio of two tables pairs scans of the same round.
:func:`same_groups` checks that two results agree (same groups, same aggregates).
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from .checks import CheckFailed
from .datasets import ScanQuery

__all__ = [
    "ENGINES",
    "SPARK_MARK",
    "DuckDbScanner",
    "rounds",
    "same_groups",
    "scan_pyarrow",
    "scan_pyiceberg",
    "spark_child_main",
]

ENGINES = {
    "pyarrow": "deltalake to_pyarrow_dataset() + pyarrow group_by",
    "duckdb": "read_parquet() over DeltaTable.file_uris() (no delta extension: INSTALL delta cannot download)",
    "spark": 'spark.read.format("delta").load(uri) + groupBy().agg() + collect(), one session, local[*]',
}
SPARK_MARK = "PARKA_BENCH_SCANS_RESULT "

# A result: group key -> the aggregates in the query's order.
Result = dict[Any, tuple[Any, ...]]
_SQL = {"mean": "avg({c})", "sum": "sum({c})", "max": "max({c})", "min": "min({c})", "count": "count({c})"}
_SQL["count_distinct"] = "count(DISTINCT {c})"


def scan_pyarrow(uri: str, query: ScanQuery) -> Result:
    """The query with deltalake + pyarrow."""
    from deltalake import DeltaTable

    return _aggregate(DeltaTable(uri).to_pyarrow_dataset().to_table(columns=query.columns), query)


def scan_pyiceberg(table: Any, query: ScanQuery) -> Result:
    """The query with pyiceberg + pyarrow, on a loaded Iceberg ``table`` (the planning of the
    snapshot's manifests included)."""
    return _aggregate(table.scan(selected_fields=tuple(query.columns)).to_arrow(), query)


def _aggregate(scanned: Any, query: ScanQuery) -> Result:
    grouped = scanned.group_by(query.group_by).aggregate(list(query.aggregations))
    names = [f"{c}_{fn}" for c, fn in query.aggregations]
    keys = grouped.column(query.group_by).to_pylist()
    values = [grouped.column(n).to_pylist() for n in names]
    return {k: tuple(v[i] for v in values) for i, k in enumerate(keys)}


def _sql(query: ScanQuery, source: str) -> str:
    try:
        aggs = [_SQL[fn].format(c=c) for c, fn in query.aggregations]
    except KeyError as exc:
        raise ValueError(f"no SQL for aggregate {exc.args[0]!r}; known: {', '.join(_SQL)}") from exc
    return f"SELECT {query.group_by}, {', '.join(aggs)} FROM {source} GROUP BY {query.group_by}"


class DuckDbScanner:
    """The query with DuckDB over the snapshot's Parquet files (one connection, reused)."""

    def __init__(self) -> None:
        import duckdb  # the bench extra

        self._con = duckdb.connect()
        self.open_s = 0.0
        """The last call's opening of the table: its Delta log read into the list of files."""

    def __call__(self, uri: str, query: ScanQuery, *, version: int | None = None) -> Result:
        """The query over the table's current snapshot, or over ``version`` of it."""
        from deltalake import DeltaTable

        start = time.perf_counter()
        files = DeltaTable(uri, version=version).file_uris()
        self.open_s = time.perf_counter() - start
        return self.read(files, query)

    def read(self, files: list[str], query: ScanQuery) -> Result:
        """The query over these Parquet files (what a scan does once it has the table's files)."""
        rows = self._con.execute(_sql(query, "read_parquet($files)"), {"files": files}).fetchall()
        return {row[0]: tuple(row[1:]) for row in rows}

    def close(self) -> None:
        self._con.close()


def _spark_scan(spark: Any, uri: str, query: ScanQuery) -> Result:
    from pyspark.sql import functions as F

    funcs = {"mean": F.avg, "sum": F.sum, "max": F.max, "min": F.min, "count": F.count}
    aggs = [F.countDistinct(c) if fn == "count_distinct" else funcs[fn](c) for c, fn in query.aggregations]
    rows = spark.read.format("delta").load(uri).groupBy(query.group_by).agg(*aggs).collect()
    return {row[0]: tuple(row[1:]) for row in rows}


def rounds(
    scan: Callable[[str], Result], tables: Mapping[str, str], *, repeats: int, warmups: int, seed: int
) -> dict[str, dict[str, Any]]:
    """Scan every table of ``tables`` (label -> URI) once per round, in a shuffled order per
    round; returns per label the ``times_s`` of the measured rounds (in round order) and the
    last result. Raises ``CheckFailed`` when two scans of one table disagree."""
    out: dict[str, dict[str, Any]] = {label: {"times_s": [], "result": None} for label in tables}
    rng = random.Random(seed)
    for i in range(warmups + repeats):
        order = list(tables)
        rng.shuffle(order)
        for label in order:
            start = time.perf_counter()
            result = scan(tables[label])
            elapsed = time.perf_counter() - start
            if out[label]["result"] is not None:
                same_groups(out[label]["result"], result, f"{label}: two scans")
            out[label]["result"] = result
            if i >= warmups:
                out[label]["times_s"].append(elapsed)
    return out


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        # sums of floats in another order differ in the last bits
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


def same_groups(expected: Result, got: Result, what: str) -> None:
    """Raise ``CheckFailed`` unless ``got`` has the groups of ``expected`` with equal aggregates
    (floats to a relative 1e-9: summation order differs between readers and file layouts)."""
    if set(expected) != set(got):
        missing, extra = set(expected) - set(got), set(got) - set(expected)
        raise CheckFailed(
            f"{what}: groups differ (missing {sorted(map(str, missing))}, extra {sorted(map(str, extra))})"
        )
    for key, values in expected.items():
        other = got[key]
        if len(values) != len(other) or not all(_close(a, b) for a, b in zip(values, other, strict=True)):
            raise CheckFailed(f"{what}: group {key!r} has {other}, expected {values}")


def to_json(result: Result) -> list[list[Any]]:
    """A result as JSON rows ``[key, *aggregates]`` (the Spark child's output)."""
    return [[k, *v] for k, v in result.items()]


def from_json(rows: list[list[Any]]) -> Result:
    return {row[0]: tuple(row[1:]) for row in rows}


def spark_child_main(argv: list[str]) -> int:
    """The Spark child: ``argv[0]`` is a JSON spec ``{"tables": {label: uri}, "group_by",
    "aggregations", "repeats", "warmups", "seed"}``; prints ``SPARK_MARK`` + the JSON of
    :func:`rounds` (results as rows) and the session's master."""
    spec = json.loads(argv[0])
    query = ScanQuery(spec["group_by"], tuple((c, fn) for c, fn in spec["aggregations"]))
    from parka.spark_ext import session

    started = time.perf_counter()
    spark = session(app_name="parka lake scans", extra_conf={"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.perf_counter() - started
    try:
        started = time.perf_counter()
        out = rounds(
            lambda uri: _spark_scan(spark, uri, query),
            spec["tables"],
            repeats=spec["repeats"],
            warmups=spec["warmups"],
            seed=spec["seed"],
        )
        doc = {
            "master": spark.sparkContext.master,
            "session_start_s": session_s,
            "rounds_s": time.perf_counter() - started,
            "tables": {k: {"times_s": v["times_s"], "result": to_json(v["result"])} for k, v in out.items()},
        }
    finally:
        spark.stop()
    print(SPARK_MARK + json.dumps(doc, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(spark_child_main(sys.argv[1:]))
