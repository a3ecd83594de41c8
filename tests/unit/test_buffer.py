from __future__ import annotations

from parka.producer._buffer import CutPolicy, PartitionBuffer, SizeModel, approx_size


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


def test_approx_size_counts_strings_and_containers() -> None:
    assert approx_size({"a": "xyz", "b": 1, "c": [b"12", None]}) == (3 + 4) + 8 + ((2 + 4) + 8 + 4) + 4


def test_partition_buffer_keeps_parallel_lists() -> None:
    buf = PartitionBuffer("t", 0, created_at=1.0)
    buf.append({"x": 1}, b"k", 5, None, None, 12)
    buf.append({"x": 2}, None, None, [("h", b"v")], None, 8)
    assert len(buf) == 2
    assert buf.keys == [b"k", None] and buf.timestamps == [5, None] and buf.raw_bytes == 20
