"""The Z-order curve of a table's rows (``parka optimize --z-order``): pure Arrow and numpy, for
any table format."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["z_order_indices"]


def z_order_indices(rows: pa.Table, columns: Sequence[str]) -> pa.Array:
    """The row order of ``rows`` along the Z-order curve of ``columns``: each column's dense rank
    (nulls last), scaled to ``63 // len(columns)`` bits, the bits interleaved."""
    bits = max(1, 63 // len(columns))
    ranks = []
    for c in columns:
        rank = pc.rank(rows.column(c).combine_chunks(), tiebreaker="dense")  # nulls last
        r = rank.to_numpy().astype(np.uint64) - np.uint64(1)
        top = int(r.max()) if len(r) else 0
        if top >= 2**bits:
            r = (r.astype(np.float64) * ((2**bits - 1) / top)).astype(np.uint64)
        ranks.append(r)
    key = np.zeros(rows.num_rows, dtype=np.uint64)
    for b in range(bits - 1, -1, -1):
        for r in ranks:
            key = (key << np.uint64(1)) | ((r >> np.uint64(b)) & np.uint64(1))
    indices: pa.Array = pc.sort_indices(pa.array(key))
    return indices
