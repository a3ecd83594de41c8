"""What every test gets: parka's loggers as they were before it; and the run's servers, stopped
once at the very end (:mod:`tests.integration._servers`)."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration import _servers

_OWNER = pytest.StashKey[bool]()
SPARK_PREFIX = "tests/integration/spark/"


if importlib.util.find_spec("xdist") is not None:

    def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
        """pytest-xdist's load scheduling, except that every test under ``tests/integration/spark/``
        goes to one worker: the session's JVM starts once there, and the tests that start Spark
        drivers of their own (kills, the cluster) never run beside it on the 2 cores. (xdist's own
        ``--dist loadgroup`` marks no longer reach its scheduler under pytest 9.2.)"""
        from xdist.scheduler import LoadScopeScheduling

        class SparkTogether(LoadScopeScheduling):  # type: ignore[misc]
            def _split_scope(self, nodeid: str) -> str:
                return "spark" if nodeid.startswith(SPARK_PREFIX) else nodeid

        return SparkTogether(config, log)


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
