"""Spark's Python worker daemon, with the decoder's imports done before it forks workers.

Spark starts ``python -m <spark.python.daemon.module>``, which forks one worker per task slot;
a worker that runs the decoder first imports pyarrow.parquet, fastavro and parka (about
0.3 CPU-seconds), and Spark starts fresh workers for each query, so every micro-batch query
paid that per core. Imported here once, the forked workers inherit them. :func:`._session.session`
sets ``spark.python.daemon.module`` to this module.
"""

from __future__ import annotations

import pyarrow.parquet  # noqa: F401
from pyspark import daemon

from . import _arrow, _raw  # noqa: F401  (_raw: raw mode's writer, deltalake with it)

if __name__ == "__main__":
    daemon.manager()
