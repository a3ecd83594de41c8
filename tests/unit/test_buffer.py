from __future__ import annotations

import numpy as np
import pyarrow as pa
from parka.producer._buffer import CutPolicy, PartitionBuffer, RowBatch, SizeModel, Staging, drain_size


def test_cut_policy_first_limit_wins() -> None:
    policy = CutPolicy(max_records=3, max_bytes=1000, linger_s=0.5)
    assert not policy.full(2, 100)
    assert policy.full(3, 100)
    assert policy.full(1, 900)  # 90 % of the byte limit
    assert not policy.due(first_at=10.0, now=10.4)
    assert policy.due(first_at=10.0, now=10.5)


def test_size_model_learns_the_ratio() -> None:
    model = SizeModel()
    assert model.predict(1000) == 1000
    model.observe(1000, 200)
    assert model.predict(1000) == 200
    model.observe(1000, 400)
    assert 200 < model.predict(1000) < 400


def test_drain_size_starts_small_then_follows_the_row_size() -> None:
    assert drain_size(10_000, 1_000_000, None) == 16  # nothing known yet: a small first drain
    assert drain_size(5, 1_000_000, None) == 5  # never more than a segment's records
    assert drain_size(10_000, 1_000_000, 200.0) == 2500  # half a segment's bytes
    assert drain_size(10_000, 1_000_000, 1.0) == 8192  # capped
    assert drain_size(10_000, 1_000_000, 1e9) == 16  # huge rows: the floor


def test_unpack_plain_values_and_side_tuples() -> None:
    def cb(err: object, msg: object) -> None:
        return None

    def default(err: object, msg: object) -> None:
        return None

    plain = Staging.unpack([{"x": 1}, {"x": 2}], None)
    assert plain.values == [{"x": 1}, {"x": 2}]
    assert (plain.keys, plain.partitions, plain.callbacks, plain.timestamps, plain.headers) == (None,) * 5
    assert Staging.unpack([{"x": 1}], default).callbacks == [default]

    mixed = Staging.unpack(
        [{"x": 1}, ({"x": 2}, b"k", -1, cb, None, None), ({"x": 3}, None, 2, None, 7, None)], default
    )
    assert mixed.values == [{"x": 1}, {"x": 2}, {"x": 3}]
    assert mixed.keys == [None, b"k", None]
    assert mixed.partitions == [-1, -1, 2]
    assert mixed.callbacks == [default, cb, default]
    assert mixed.timestamps == [None, None, 7]
    assert mixed.headers is None


def _batch(n: int, offset: int = 0) -> RowBatch:
    table = pa.table({"x": list(range(offset, offset + n))})
    keys = pa.array([str(i).encode() for i in range(offset, offset + n)], pa.binary())
    return RowBatch(table, keys=keys, callbacks=[None] * n, values=[{"x": i} for i in range(offset, offset + n)])


def test_row_batch_take_slice_concat_keep_rows_together() -> None:
    both = RowBatch.concat([_batch(3), RowBatch(pa.table({"x": [3, 4]}))])
    assert both.table["x"].to_pylist() == [0, 1, 2, 3, 4]
    assert both.keys is not None and both.keys.to_pylist() == [b"0", b"1", b"2", None, None]
    assert both.values == [{"x": 0}, {"x": 1}, {"x": 2}, None, None]
    picked = both.take(np.array([1, 3]))
    assert picked.table["x"].to_pylist() == [1, 3] and picked.values == [{"x": 1}, None]
    assert picked.keys is not None and picked.keys.to_pylist() == [b"1", None]
    part = both.slice(2, 4)
    assert part.table["x"].to_pylist() == [2, 3] and part.callbacks == [None, None] and part.headers is None


def test_partition_buffer_counts_rows_and_keeps_the_oldest_time() -> None:
    buf = PartitionBuffer("t", 0, created_at=5.0)
    buf.append(_batch(3), staged_at=4.0)
    buf.append(_batch(2, 3), staged_at=6.0)
    assert len(buf) == 5 and buf.created_at == 4.0 and buf.arrow_bytes > 0
