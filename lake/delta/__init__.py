"""The Delta Lake wing of :mod:`parka.lake`: what only Delta tables use.

* The pure Delta rules both Delta engines share (``_rules.py``: which types and names Delta
  stores, the schema JSON both ways, evolution, which tables raw files may join, what a commit
  must satisfy; no deltalake), so delta-spark's engine in ``parka.spark_ext`` builds on them.
* The delta-rs engine (``_rs.py``: :class:`RsEngine`, :class:`RsTableLog`), its maintenance
  calls (``_rs_maintenance.py``) and ``parka optimize``'s compaction, Z-order, VACUUM and
  checkpoint (``_optimize.py``: :func:`optimize_table`), and background compaction's rewrite
  (:func:`compact_table`), both over one rewrite core.
* The files a Delta log still names, tombstones included, read from its files (``_logscan.py``:
  :func:`logged_files`), for both Delta engines' orphan cleanup.
* Deletion vectors (``_dv.py``) and the one Delta commit parka writes itself rather than through
  delta-rs, whose commit API carries none: rows deleted by deletion vector, with new files and
  ``txn`` versions, at exactly the read version + 1 (``_dv_commit.py``, called by
  ``_rs.commit_row_deletions``; the live files' ``add`` actions it repeats: ``_logscan.live_adds``).

It imports the format-neutral modules of :mod:`parka.lake` and never the Iceberg wing.
"""

from ._dv_commit import ENABLE_PROPERTY as ENABLE_DELETION_VECTORS
from ._logscan import logged_files
from ._optimize import compact_table, optimize_table
from ._rs import RsEngine, RsTableLog
from ._rs_maintenance import (
    DEFAULT_TABLE_RETENTION_S,
    Retention,
    commits_per_s,
    retention_properties,
    table_retention,
    vacuum_by_table_retention,
)
from ._rules import (
    arrow_schema_of_json,
    check_commit,
    check_partition_columns,
    check_schema,
    check_writable,
    evolve_schema_json,
    schema_json,
)

__all__ = [
    "DEFAULT_TABLE_RETENTION_S",
    "ENABLE_DELETION_VECTORS",
    "Retention",
    "RsEngine",
    "RsTableLog",
    "arrow_schema_of_json",
    "check_commit",
    "check_partition_columns",
    "check_schema",
    "check_writable",
    "commits_per_s",
    "compact_table",
    "evolve_schema_json",
    "logged_files",
    "optimize_table",
    "retention_properties",
    "schema_json",
    "table_retention",
    "vacuum_by_table_retention",
]
