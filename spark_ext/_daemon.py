"""Spark's Python worker daemon, with the decoder's imports done before it forks workers, and
without the per-task re-read of every zip archive on the path.

Spark starts ``python -m <spark.python.daemon.module>``, which forks one worker per task slot;
a worker that runs the decoder first imports pyarrow.parquet, fastavro and parka (about
0.3 CPU-seconds), and Spark starts fresh workers for each query, so every micro-batch query
paid that per core. Imported here once, the forked workers inherit them. :func:`._session.session`
sets ``spark.python.daemon.module`` to this module.

Every task then starts with ``importlib.invalidate_caches()`` (pyspark's
``worker_util.setup_spark_files``, so that files added with ``addPyFile`` become importable).
On Python 3.10 and 3.11 (until CPython's gh-103200 made it lazy) a zip importer's
``invalidate_caches`` re-reads its archive's whole directory on the spot, and Spark puts
``pyspark.zip`` (3 MB, thousands of entries) on the workers' path: each package imported from
it has an importer of its own, about 30 in a decoder task, so every task re-read that directory
some 30 times, about 0.4 CPU-seconds per task, more than a raw-mode task's own work.
:func:`skipping_unchanged_zips` skips the zip importers whose archive has not changed since the
daemon started (same size and modification time); a changed or new archive is re-read as
before. Where invalidation is lazy already this only saves a stat.
"""

from __future__ import annotations

import importlib
import os
import sys
import zipimport
from collections.abc import Callable

import pyarrow.parquet  # noqa: F401
from pyspark import daemon

from . import _arrow, _raw  # noqa: F401  (_raw: raw mode's writer, deltalake with it)

_ArchiveStat = tuple[int, int]


def _stat(archive: str) -> _ArchiveStat | None:
    try:
        st = os.stat(archive)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def skipping_unchanged_zips(invalidate: Callable[[], None]) -> Callable[[], None]:
    """``invalidate`` (``importlib.invalidate_caches``), run with the zip importers of archives
    that have not changed since this call taken out of ``sys.path_importer_cache``, and put back
    after. An archive's stat at this call is its baseline; one that changes later is re-read
    once and gets a new baseline."""
    seen: dict[str, _ArchiveStat | None] = {}

    def baseline(finder: object) -> None:
        if isinstance(finder, zipimport.zipimporter) and finder.archive not in seen:
            seen[finder.archive] = _stat(finder.archive)

    for finder in list(sys.path_importer_cache.values()):
        baseline(finder)

    def invalidate_caches() -> None:
        zips = {path: f for path, f in sys.path_importer_cache.items() if isinstance(f, zipimport.zipimporter)}
        for finder in zips.values():
            baseline(finder)  # an importer made since (a new archive): read at creation, fresh now
        changed = set()
        for archive in {f.archive for f in zips.values()}:
            now = _stat(archive)
            if now is None or now != seen[archive]:
                changed.add(archive)
                seen[archive] = now
        kept = {path: f for path, f in zips.items() if f.archive not in changed}
        for path in kept:
            del sys.path_importer_cache[path]
        try:
            invalidate()
        finally:
            sys.path_importer_cache.update(kept)

    return invalidate_caches


if __name__ == "__main__":  # the forked workers inherit the wrapper; an import changes nothing
    importlib.invalidate_caches = skipping_unchanged_zips(importlib.invalidate_caches)
    daemon.manager()
