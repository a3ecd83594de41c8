"""A part used without its extra names the extra and a command that installs it from where this
parka came from."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from parka.errors import MissingExtraError
from parka.extras import GENERIC_SOURCE, install_command, origin_requirement, require


def test_require_passes_when_every_module_is_found() -> None:
    require(("json", "pyarrow"), "lake", "parka ingest")


def test_require_names_the_extra_the_missing_modules_and_the_command() -> None:
    with pytest.raises(MissingExtraError) as info:
        require(("json", "parka_no_such_module_a", "parka_no_such_module_b"), "lake", "parka ingest")
    err = info.value
    assert err.extra == "lake"
    assert err.missing == ["parka_no_such_module_a", "parka_no_such_module_b"]
    assert err.install == install_command("lake")
    assert str(err) == (
        "parka ingest needs parka's 'lake' extra (parka_no_such_module_a, parka_no_such_module_b not installed): "
        + install_command("lake")
    )
    assert isinstance(err, ImportError)


def test_the_command_runs_this_interpreters_pip_on_this_installation() -> None:
    # make setup installs the clone editable: pip recorded the clone's directory
    clone = Path(__file__).resolve().parents[2]
    assert shlex.split(install_command("lake")) == [sys.executable, "-m", "pip", "install", "-e", f"{clone}[lake]"]


def test_a_clone_installed_editable_is_reinstalled_editable(tmp_path: Path) -> None:
    record = {"url": tmp_path.as_uri(), "dir_info": {"editable": True}}
    assert shlex.split(origin_requirement("lake", record)) == ["-e", f"{tmp_path}[lake]"]


def test_a_clone_installed_as_a_copy_is_installed_again_from_its_directory(tmp_path: Path) -> None:
    clone = tmp_path / "my parka"  # a space: the command quotes the path
    clone.mkdir()
    record = {"url": clone.as_uri(), "dir_info": {}}
    assert origin_requirement("iceberg", record) == f"'{clone}[iceberg]'"
    assert shlex.split(origin_requirement("iceberg", record)) == [f"{clone}[iceberg]"]


def test_a_wheel_is_named_by_its_path(tmp_path: Path) -> None:
    wheel = tmp_path / "parka-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    record = json.loads(json.dumps({"url": wheel.as_uri(), "archive_info": {"hashes": {"sha256": "00"}}}))
    assert shlex.split(origin_requirement("lake", record)) == [f"{wheel}[lake]"]


def test_a_path_that_is_gone_leaves_the_place_to_fill_in(tmp_path: Path) -> None:
    record = {"url": (tmp_path / "deleted.whl").as_uri(), "archive_info": {}}
    assert shlex.split(origin_requirement("lake", record)) == [f"{GENERIC_SOURCE}[lake]"]


def test_a_repository_is_named_with_the_commit_installed() -> None:
    record = {
        "url": "https://example.org/parka.git",
        "vcs_info": {"vcs": "git", "requested_revision": "main", "commit_id": "0123abcd"},
    }
    assert shlex.split(origin_requirement("spark", record)) == [
        "parka[spark] @ git+https://example.org/parka.git@0123abcd"
    ]


def test_a_remote_archive_is_a_direct_reference() -> None:
    record = {"url": "https://example.org/dist/parka-0.1.0-py3-none-any.whl", "archive_info": {}}
    assert shlex.split(origin_requirement("lake", record)) == [
        "parka[lake] @ https://example.org/dist/parka-0.1.0-py3-none-any.whl"
    ]


def test_no_record_leaves_the_place_to_fill_in() -> None:
    # installed without PEP 610 record (an index, an old pip) or not installed at all
    assert shlex.split(origin_requirement("metrics", None)) == [f"{GENERIC_SOURCE}[metrics]"]
