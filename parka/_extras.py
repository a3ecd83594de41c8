"""Which optional dependency group (extra) a part of parka needs, checked before it is imported.

``pip install parka`` gives the producer and the messaging shim; a part that needs more calls
:func:`require` at its top, so that using it without its extra fails with one line naming the
extra to install instead of a bare ``ModuleNotFoundError`` from deep inside an import.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from .errors import MissingExtraError

__all__ = ["require"]


def require(modules: Iterable[str], extra: str, needed_by: str) -> None:
    """Raise :class:`MissingExtraError` naming ``extra`` unless every module in ``modules`` can be found."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(extra, missing, needed_by)
