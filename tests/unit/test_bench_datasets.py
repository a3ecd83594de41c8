"""The benchmarks' data sets have the rows asked for, small counts included."""

from __future__ import annotations

import pytest

from benchmarks.datasets import DATASET_NAMES, load


@pytest.mark.parametrize("name", DATASET_NAMES)
@pytest.mark.parametrize("rows", [1, 7, 100, 1000])
def test_a_data_set_has_the_rows_asked_for(name: str, rows: int) -> None:
    assert load(name, rows).table.num_rows == rows
