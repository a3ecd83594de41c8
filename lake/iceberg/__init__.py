"""The Apache Iceberg wing of :mod:`parka.lake` (pyiceberg, the ``iceberg`` extra): what only
Iceberg tables use.

* The engine (``_engine.py``: :class:`IcebergEngine`, a table's catalog opened and its tables
  created) and a table's handle (``_table.py``: :class:`IcebergTableLog`, the commit protocol's
  pieces on Iceberg: the ``txn`` state in the snapshot summary under :data:`TXNS_KEY`, commits
  that assert the snapshot read, snapshot expiry).
* Iceberg's types as parka's rules see them (``_schema.py``: which columns a table can store,
  pyiceberg's conversion), its catalogs' configuration (``_catalog.py``:
  :func:`catalog_properties`), parka's partition specs as Iceberg transforms
  (``_partitions.py``), what keeps commits cheap as a table lives on (``_snapshots.py``).
* Compaction and snapshot expiry (``_optimize.py``: :func:`optimize_iceberg`).

:mod:`parka.lake` imports it when first asked for an Iceberg name. It imports the
format-neutral modules of :mod:`parka.lake` and never the Delta wing.
"""

# ruff: noqa: E402  (the extra is checked before pyiceberg is imported)
from parka.extras import require

require(("pyiceberg", "sqlalchemy"), "iceberg", "Iceberg tables (--catalog)")

from ._catalog import catalog_properties
from ._engine import IcebergEngine
from ._optimize import compact_iceberg, optimize_iceberg
from ._schema import iceberg_arrow_schema
from ._table import TXNS_KEY, IcebergTableLog

__all__ = [
    "TXNS_KEY",
    "IcebergEngine",
    "IcebergTableLog",
    "catalog_properties",
    "compact_iceberg",
    "iceberg_arrow_schema",
    "optimize_iceberg",
]
