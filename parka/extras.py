"""Which optional dependency group (extra) a part of parka needs, checked before it is imported,
and the command that installs it.

parka alone gives the producer and the messaging shim; a part that needs more calls
:func:`require` at its top, so that using it without its extra fails with one line naming the
extra and the command to install it, instead of a bare ``ModuleNotFoundError`` from deep inside
an import.

parka is installed from a clone or a built wheel, not from a package index, so the command names
where this installation came from: pip records it in the distribution's ``direct_url.json``
(PEP 610), e.g. ``{"url": "file:///src/parka", "dir_info": {"editable": true}}``. Reinstalling
from the same place with the extra adds it: ``python -m pip install -e '/src/parka[lake]'``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from .errors import MissingExtraError

__all__ = ["install_command", "require"]

DISTRIBUTION = "parka"
# When the origin is unknown or gone (a moved clone, a deleted wheel): the form to fill in.
GENERIC_SOURCE = "<parka clone or wheel>"


def require(modules: Iterable[str], extra: str, needed_by: str) -> None:
    """Raise :class:`MissingExtraError` naming ``extra`` unless every module in ``modules`` can be found."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(extra, missing, needed_by, install_command(extra))


def install_command(extra: str) -> str:
    """The shell command that adds ``extra`` to this installation of parka, for an error message.

    It runs this interpreter's pip (``sys.executable -m pip``), so it installs where parka is
    even when another ``pip`` comes first on ``PATH``, and it installs from where this parka was
    installed (:func:`origin_requirement`)."""
    return f"{shlex.quote(sys.executable)} -m pip install {origin_requirement(extra, _direct_url())}"


def origin_requirement(extra: str, direct_url: dict[str, Any] | None) -> str:
    """pip's arguments that install parka with ``extra`` from the place ``direct_url`` names.

    ``direct_url`` is the distribution's PEP 610 record, None when there is none (installed from
    a package index, or not installed). A local clone or wheel is named by its path (``-e`` kept
    for an editable install); a remote archive or repository by a direct reference
    (``'parka[lake] @ git+https://...@<commit>'``); a local path that no longer exists, or an
    unknown origin, by :data:`GENERIC_SOURCE` for the user to fill in."""
    if direct_url is None or not isinstance(direct_url.get("url"), str):
        return shlex.quote(f"{GENERIC_SOURCE}[{extra}]")
    url: str = direct_url["url"]
    parsed = urlparse(url)
    vcs = direct_url.get("vcs_info")
    if isinstance(vcs, dict):
        commit = vcs.get("commit_id") or vcs.get("requested_revision")
        at = f"@{commit}" if commit else ""
        return shlex.quote(f"{DISTRIBUTION}[{extra}] @ {vcs.get('vcs', 'git')}+{url}{at}")
    if parsed.scheme == "file":
        path = Path(url2pathname(unquote(parsed.path)))
        if not path.exists():
            return shlex.quote(f"{GENERIC_SOURCE}[{extra}]")
        editable = isinstance(direct_url.get("dir_info"), dict) and direct_url["dir_info"].get("editable")
        return ("-e " if editable else "") + shlex.quote(f"{path}[{extra}]")
    return shlex.quote(f"{DISTRIBUTION}[{extra}] @ {url}")


def _direct_url() -> dict[str, Any] | None:
    """This parka's PEP 610 record, or None (no such file, or parka is not installed).

    The first distribution named parka on ``sys.path`` that has one: run from a clone, the
    clone's own ``parka.egg-info`` (left by an editable install's build) comes first and has none."""
    for dist in importlib.metadata.distributions(name=DISTRIBUTION):
        text = dist.read_text("direct_url.json")
        if not text:
            continue
        try:
            record = json.loads(text)
        except ValueError:
            continue
        if isinstance(record, dict):
            return record
    return None
