"""The upsert benchmark's pure pieces (``benchmarks/upsert.py``): its anchors' batches hold each
id's last event of the batch, and applied in order they give the model every arm is checked
against; the check names what differs."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from benchmarks.upsert import Events, batches, check, make_events, model_of


def test_batches_applied_in_order_are_the_model() -> None:
    events = make_events(50, 400, 0.2, seed=3)
    state = dict.fromkeys(range(50), 0)
    for upserts, deletes in batches(events, 37):
        ids = upserts["id"].to_pylist()
        assert len(ids) == len(set(ids)) and not set(ids) & set(deletes.tolist())  # one event per id
        state.update(zip(ids, upserts["version"].to_pylist(), strict=True))
        for key in deletes.tolist():
            state.pop(key, None)
    assert state == model_of(50, events)


def test_a_batch_keeps_an_ids_last_event() -> None:
    events = Events(np.array([1, 1, 2, 2], np.int64), np.array([False, True, True, False]))
    ((upserts, deletes),) = batches(events, 10)
    assert upserts.select(["id", "version"]).to_pylist() == [{"id": 2, "version": 4}]
    assert deletes.tolist() == [1]


def test_the_check_names_the_arm_and_the_difference() -> None:
    model = {1: 5, 2: 7}
    good = pa.table({"id": [1, 2], "version": [5, 7]})
    assert check(good, model, "x")["rows"] == 2
    with pytest.raises(AssertionError, match=r"arm-b: the table is not the model"):
        check(pa.table({"id": [1, 1, 2], "version": [5, 5, 7]}), model, "arm-b")
