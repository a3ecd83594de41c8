"""Session fixtures of the column-encryption tests: master keys made for the run, and one topic
of encrypted segments (produced once, read by every test here and by the Spark ones)."""

from __future__ import annotations

import pytest

from ._crypt import EncryptedTopic, make_encrypted_topic


@pytest.fixture(scope="session")
def encrypted_topic(bootstrap: str) -> EncryptedTopic:
    return make_encrypted_topic(bootstrap)
