"""What every test gets: parka's loggers as they were before it; and the run's servers, stopped
once at the very end (:mod:`tests.integration._servers`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.integration import _servers

_OWNER = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist's workers inherit the folder from the process that spawned them
    config.stash[_OWNER] = _servers.make_run_dir()


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_OWNER, False):
        _servers.stop_all()


@pytest.fixture(autouse=True)
def _parka_logging_restored() -> Iterator[None]:
    """A test that runs a daemon's ``main()`` in-process installs its stderr handler on the
    ``parka`` logger, holding the stream pytest captured for that test; later tests' log lines
    went to it after pytest had closed it. Each test's handlers and level go with it."""
    logger = logging.getLogger("parka")
    handlers, level = list(logger.handlers), logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
