"""The list of files Ivy fetches for the tests' Spark session (``tests/integration/spark/
session-jars.lock``), which the jars' fetch gets at once before Ivy resolves from them: that it is
of the session's packages as they are now, and that a file which does not match its SHA-1, or a
list of other packages, sends Ivy back to Maven Central. The fetch (``scripts/fetch-central.sh``)
runs curl on ``file:`` URLs here, without a network."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from tests.integration.spark import _jars

REGENERATE = "python -m tests.integration.spark._jars --lock"


def test_the_lock_is_of_the_session_packages_and_names_each_of_their_jars() -> None:
    files = _jars._locked()
    assert files is not None, f"{_jars.LOCK} was written for other packages or settings: run `{REGENERATE}`"
    paths = [path for _, path in files]
    assert len(paths) == len(set(paths))
    for sha1, path in files:
        assert re.fullmatch(r"[0-9a-f]{40}", sha1), sha1
        assert not path.startswith("/") and ".." not in path.split("/"), path
    for coordinate in _jars.SESSION_PACKAGES:
        group, artifact, version = coordinate.split(":")
        stem = f"{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}"
        assert {f"{stem}.pom", f"{stem}.jar"} <= set(paths), coordinate


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository on disk, as Spark's DEFAULT_ARTIFACT_REPOSITORY, holding one jar."""
    root = tmp_path / "repository"
    jar = root / "org" / "example" / "lib" / "1.0" / "lib-1.0.jar"
    jar.parent.mkdir(parents=True)
    jar.write_bytes(b"PK\x03\x04 a jar")
    monkeypatch.setenv("DEFAULT_ARTIFACT_REPOSITORY", root.as_uri())
    return root


def lock_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, digest: str, sha1: str) -> None:
    lock = tmp_path / "session-jars.lock"
    lock.write_text(f"# a list\n# digest {digest}\n{sha1} org/example/lib/1.0/lib-1.0.jar\n")
    monkeypatch.setattr(_jars, "LOCK", lock)


def test_the_listed_files_are_fetched_into_a_repository_ivy_then_resolves_from(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jar = repository / "org" / "example" / "lib" / "1.0" / "lib-1.0.jar"
    lock_of(tmp_path, monkeypatch, _jars._lock_digest(), hashlib.sha1(jar.read_bytes()).hexdigest())
    fetched = tmp_path / "work" / "mirror"
    fetched.parent.mkdir()
    assert _jars._mirror(fetched) == f"{fetched.as_uri()}/"
    assert (fetched / "org" / "example" / "lib" / "1.0" / "lib-1.0.jar").read_bytes() == jar.read_bytes()


def test_a_file_that_does_not_match_its_sha1_sends_ivy_to_the_repository(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lock_of(tmp_path, monkeypatch, _jars._lock_digest(), "0" * 40)
    (tmp_path / "work").mkdir()
    assert _jars._mirror(tmp_path / "work" / "mirror") is None
    err = capsys.readouterr().err
    assert "files that do not match their SHA-1 (removed)" in err
    assert f"{tmp_path / 'work' / 'mirror'}/org/example/lib/1.0/lib-1.0.jar: FAILED" in err
    assert not (tmp_path / "work" / "mirror" / "org" / "example" / "lib" / "1.0" / "lib-1.0.jar").exists()


def test_a_missing_file_or_a_list_of_other_packages_sends_ivy_to_the_repository(
    repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "work").mkdir()
    lock_of(tmp_path, monkeypatch, "0123456789abcdef", "0" * 40)
    assert _jars._mirror(tmp_path / "work" / "mirror") is None
    assert "session-jars.lock is not of the session's packages" in capsys.readouterr().err
    lock_of(tmp_path, monkeypatch, _jars._lock_digest(), "0" * 40)
    (repository / "org" / "example" / "lib" / "1.0" / "lib-1.0.jar").unlink()
    assert _jars._mirror(tmp_path / "work" / "again") is None
    assert f"curl could not fetch every file from {repository.as_uri()}/" in capsys.readouterr().err
