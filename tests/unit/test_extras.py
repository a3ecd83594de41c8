"""A part used without its extra names the extra to install."""

from __future__ import annotations

import pytest

from parka._extras import require
from parka.errors import MissingExtraError


def test_require_passes_when_every_module_is_found() -> None:
    require(("json", "pyarrow"), "lake", "parka ingest")


def test_require_names_the_extra_and_the_missing_modules() -> None:
    with pytest.raises(MissingExtraError) as info:
        require(("json", "parka_no_such_module_a", "parka_no_such_module_b"), "lake", "parka ingest")
    err = info.value
    assert err.extra == "lake"
    assert err.missing == ["parka_no_such_module_a", "parka_no_such_module_b"]
    assert str(err) == (
        "parka ingest needs parka's 'lake' extra (parka_no_such_module_a, parka_no_such_module_b not installed): "
        "pip install 'parka[lake]'"
    )
    assert isinstance(err, ImportError)
