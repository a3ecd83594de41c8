"""The static checks: ruff, mypy and the import contracts (``make lint``), and the docs site's
strict build (``make docs-build``). In ``make test`` they run beside the tests on the CPU the tests
leave idle (:mod:`tests._checks`); this test, handed out last, reports them."""

from __future__ import annotations

import pytest

from tests import _checks

pytestmark = pytest.mark.tail


def test_lint_and_the_docs_site_pass() -> None:
    result = _checks.result(timeout_s=280)
    assert result.returncode == 0, f"make {' '.join(_checks.TARGETS)} failed:\n{result.output[-20000:]}"
