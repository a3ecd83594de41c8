"""Parquet modular encryption for segments: ``columnar.encryption.*`` settings and their keys.

A segment stays a standalone Parquet file; with encryption, chosen columns (and optionally the
footer) are encrypted by Parquet's own modular encryption (``pyarrow.parquet.encryption``), so
every reader that has the keys (pyarrow, parquet-mr in Spark) reads it, and raw ingestion lands
it unchanged: the data files in the table stay encrypted.

=========================================  ============================================  ==========
key                                        values                                        default
=========================================  ============================================  ==========
``columnar.encryption.columns``            ``<master key id>:<col>,<col>;<id>:<col>``    none
                                           (parquet-mr's ``parquet.encryption.column.
                                           keys`` format; ``a.b`` for a struct field)
``columnar.encryption.footer.key``         master key id of the footer key (signs a      required
                                           plaintext footer, encrypts an encrypted one)  with columns
``columnar.encryption.plaintext.footer``   ``true`` | ``false``                          ``true``
``columnar.encryption.double.wrapping``    ``true`` | ``false``                          ``true``
``columnar.encryption.kms.client``         ``local`` | ``module:Class`` (a pyarrow       ``local``
                                           ``KmsClient`` built from a
                                           ``KmsConnectionConfig``) | a callable doing so
``columnar.encryption.kms.keys``           local KMS master keys, ``id:<base64>,...``    env
                                           (16, 24 or 32 bytes each)                     ``PARKA_KMS_KEYS``
``columnar.encryption.kms.instance.id``    passed to the KMS client                      ``DEFAULT``
``columnar.encryption.kms.instance.url``   passed to the KMS client                      ``DEFAULT``
``columnar.encryption.kms.access.token``   passed to the KMS client                      ``DEFAULT``
``columnar.encryption.kms.conf.<name>``    passed as ``custom_kms_conf[name]``           none
``columnar.encryption.cache.lifetime.s``   how long keys are cached                      ``600``
=========================================  ============================================  ==========

The footer is plaintext by default: a reader without keys (and ``parka ingest``) still sees the
schema, the row count and the statistics of the columns that are not encrypted, while the
encrypted columns' pages and statistics stay unreadable; the footer is signed, so tampering is
detected by readers with the footer key.

Readers (:class:`parka.consumer.ParquetConsumer`, ``parka.spark_ext``) take the ``kms`` keys
only. The local KMS wraps keys as parquet-mr's ``InMemoryKMS`` does (AES-GCM with the master
key, the key id as AAD; ``nonce || ciphertext || tag`` in base64), so files written here are
read by Spark with ``InMemoryKMS`` and the same key list (:func:`spark_hadoop_conf`). It is for
tests and demos: master keys sit in configuration or the environment. Key bytes never appear in
an error message, a ``repr`` or a log line.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import importlib
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import pyarrow.parquet.encryption as pe

from .errors import ConfigError
from .extras import install_command

__all__ = [
    "ENCRYPTION_PREFIX",
    "KEYS_ENV",
    "EncryptionSettings",
    "KmsSettings",
    "LocalKmsClient",
    "decryption_properties",
    "encryption_properties",
    "parse_encryption_config",
    "parse_kms_config",
    "spark_hadoop_conf",
]

ENCRYPTION_PREFIX = "columnar.encryption."
KMS_PREFIX = ENCRYPTION_PREFIX + "kms."
KEYS_ENV = "PARKA_KMS_KEYS"
_CUSTOM_PREFIX = KMS_PREFIX + "conf."
_KMS_KEYS = frozenset(KMS_PREFIX + k for k in ("client", "keys", "instance.id", "instance.url", "access.token")) | {
    ENCRYPTION_PREFIX + "cache.lifetime.s"
}
_WRITER_KEYS = frozenset(
    ENCRYPTION_PREFIX + k for k in ("columns", "footer.key", "plaintext.footer", "double.wrapping")
)
KNOWN_KEYS = _KMS_KEYS | _WRITER_KEYS
# parquet-mr's InMemoryKMS, in parquet-hadoop's tests jar (not on Spark's own classpath).
IN_MEMORY_KMS = "org.apache.parquet.crypto.keytools.mocks.InMemoryKMS"
PROPERTIES_DRIVEN_FACTORY = "org.apache.parquet.crypto.keytools.PropertiesDrivenCryptoFactory"


@dataclass(frozen=True)
class KmsSettings:
    """Where keys come from. Hashable and picklable (Spark ships it to executors); the secrets
    are left out of ``repr``."""

    client: str | Callable[[pe.KmsConnectionConfig], pe.KmsClient] = "local"
    instance_id: str = "DEFAULT"
    instance_url: str = "DEFAULT"
    access_token: str = field(default="DEFAULT", repr=False)
    custom: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    master_keys: tuple[tuple[str, bytes], ...] = field(default=(), repr=False)
    cache_lifetime_s: float = 600.0


@dataclass(frozen=True)
class EncryptionSettings:
    """What a producer encrypts, and with which master keys."""

    kms: KmsSettings
    footer_key: str
    column_keys: tuple[tuple[str, tuple[str, ...]], ...]
    plaintext_footer: bool = True
    double_wrapping: bool = True

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(c for _, cols in self.column_keys for c in cols)


class LocalKmsClient(pe.KmsClient):
    """A KMS whose master keys are given to it: wraps like parquet-mr's ``InMemoryKMS``.

    Raises (from ``wrap_key``/``unwrap_key``): ``KeyError`` naming an unknown master key id;
    ``ValueError`` when a wrapped key was not made with this master key.
    """

    def __init__(self, master_keys: Mapping[str, bytes]) -> None:
        super().__init__()
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                f"the local KMS needs the cryptography package, parka's 'encryption' extra: "
                f"{install_command('encryption')}"
            ) from exc
        self._aead = {kid: AESGCM(key) for kid, key in master_keys.items()}

    def _master(self, kid: str) -> Any:
        try:
            return self._aead[kid]
        except KeyError:
            raise KeyError(f"master key '{kid}' is not among the local KMS keys ({', '.join(self._aead)})") from None

    def wrap_key(self, key_bytes: bytes, master_key_identifier: str) -> str:
        nonce = os.urandom(12)
        sealed = self._master(master_key_identifier).encrypt(nonce, key_bytes, master_key_identifier.encode())
        return base64.b64encode(nonce + sealed).decode()

    def unwrap_key(self, wrapped_key: str, master_key_identifier: str) -> bytes:
        from cryptography.exceptions import InvalidTag

        raw = base64.b64decode(wrapped_key)
        try:
            plain = self._master(master_key_identifier).decrypt(raw[:12], raw[12:], master_key_identifier.encode())
        except InvalidTag:
            raise ValueError(
                f"the local KMS key '{master_key_identifier}' does not unwrap this file's key: another key "
                "of that id wrapped it"
            ) from None
        return bytes(plain)


def _flag(conf: Mapping[str, Any], key: str, default: bool) -> bool:
    raw = conf.get(key, default)
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise ConfigError(key, raw, "true | false")


def _master_keys(conf: Mapping[str, Any]) -> tuple[tuple[str, bytes], ...]:
    key = KMS_PREFIX + "keys"
    raw = conf.get(key)
    source = key
    if raw is None:
        raw, source = os.environ.get(KEYS_ENV, ""), KEYS_ENV
    if not isinstance(raw, str):
        raise ConfigError(key, "<hidden>", "a string 'id:<base64 key>,id2:<base64 key>'")
    out: dict[str, bytes] = {}
    for index, item in enumerate(i.strip() for i in raw.split(",") if i.strip()):
        kid, sep, encoded = item.partition(":")
        kid = kid.strip() if sep else ""  # without ':' the whole entry may be a key
        # Never echo the value: it is a key. Name the entry by its id, or its position.
        where = f"entry {index + 1} ('{kid}')" if kid else f"entry {index + 1}"
        if not sep or not kid:
            raise ConfigError(source, "<hidden>", "'id:<base64 key>' entries", reason=f"{where} has no 'id:'")
        try:
            material = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(source, "<hidden>", "base64 keys", reason=f"{where} is not base64") from None
        if len(material) not in (16, 24, 32):
            raise ConfigError(
                source, "<hidden>", "keys of 16, 24 or 32 bytes", reason=f"{where} has {len(material)} bytes"
            )
        if kid in out:
            raise ConfigError(source, "<hidden>", "distinct key ids", reason=f"'{kid}' is given twice")
        out[kid] = material
    return tuple(out.items())


def _check_known(conf: Mapping[str, Any], known: frozenset[str]) -> None:
    unknown = sorted(
        k for k in conf if k.startswith(ENCRYPTION_PREFIX) and k not in known and not k.startswith(_CUSTOM_PREFIX)
    )
    if unknown:
        raise ConfigError(unknown[0], "<set>", "known keys: " + ", ".join(sorted(known)) + f", {_CUSTOM_PREFIX}<name>")


def parse_kms_config(conf: Mapping[str, Any], *, reader: bool = True) -> KmsSettings | None:
    """The KMS settings in ``conf``, or ``None`` when it has no ``columnar.encryption.*`` key.

    With ``reader``, the writer-only keys (columns, footer) are refused as unknown.

    Raises:
        ConfigError: an unknown ``columnar.encryption.*`` key, a malformed local key list (the
            message names the entry, never its bytes), a bad cache lifetime or client.
    """
    _check_known(conf, _KMS_KEYS if reader else KNOWN_KEYS)
    if not any(k.startswith(ENCRYPTION_PREFIX) for k in conf):
        return None
    client = conf.get(KMS_PREFIX + "client", "local")
    if not (callable(client) or (isinstance(client, str) and (client == "local" or _class_path(client)))):
        raise ConfigError(KMS_PREFIX + "client", client, "local | module:Class | a callable")
    master_keys = _master_keys(conf) if client == "local" else ()
    if client == "local" and not master_keys:
        raise ConfigError(
            KMS_PREFIX + "keys",
            "<empty>",
            f"master keys 'id:<base64>,...' here or in ${KEYS_ENV}",
            reason="the local KMS has no keys",
        )
    lifetime_key = ENCRYPTION_PREFIX + "cache.lifetime.s"
    try:
        lifetime = float(conf.get(lifetime_key, 600.0))
    except (TypeError, ValueError):
        raise ConfigError(lifetime_key, conf.get(lifetime_key), "a number of seconds > 0") from None
    if not lifetime > 0:
        raise ConfigError(lifetime_key, conf.get(lifetime_key), "a number of seconds > 0")

    def text(name: str) -> str:
        value = conf.get(KMS_PREFIX + name, "DEFAULT")
        if not isinstance(value, str):
            raise ConfigError(KMS_PREFIX + name, "<hidden>" if name == "access.token" else value, "a string")
        return value

    custom = tuple(sorted((k[len(_CUSTOM_PREFIX) :], str(v)) for k, v in conf.items() if k.startswith(_CUSTOM_PREFIX)))
    return KmsSettings(
        client=client,
        instance_id=text("instance.id"),
        instance_url=text("instance.url"),
        access_token=text("access.token"),
        custom=custom,
        master_keys=master_keys,
        cache_lifetime_s=lifetime,
    )


def _class_path(path: str) -> tuple[str, str] | None:
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    return (module, name) if module and name and name.isidentifier() else None


def parse_encryption_config(conf: Mapping[str, Any]) -> EncryptionSettings | None:
    """A producer's encryption settings, or ``None`` when ``conf`` has no ``columnar.encryption.*`` key.

    Raises:
        ConfigError: as :func:`parse_kms_config`; no columns or no footer key; a malformed
            column list; a column given two keys.
    """
    kms = parse_kms_config(conf, reader=False)
    if kms is None:
        return None
    columns_key, footer_key = ENCRYPTION_PREFIX + "columns", ENCRYPTION_PREFIX + "footer.key"
    raw = conf.get(columns_key)
    allowed = "'<master key id>:<col>,<col>;<master key id>:<col>'"
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(columns_key, raw, allowed, reason="encryption needs the columns to encrypt")
    column_keys: dict[str, list[str]] = {}
    seen: set[str] = set()
    for part in (p.strip() for p in raw.split(";") if p.strip()):
        kid, sep, cols = part.partition(":")
        names = [c.strip() for c in cols.split(",") if c.strip()]
        if not sep or not kid.strip() or not names:
            raise ConfigError(columns_key, raw, allowed, reason=f"'{part}' is not 'key:columns'")
        for name in names:
            if name in seen:
                raise ConfigError(columns_key, raw, allowed, reason=f"column '{name}' is given two keys")
            seen.add(name)
        column_keys.setdefault(kid.strip(), []).extend(names)
    footer = conf.get(footer_key)
    if not isinstance(footer, str) or not footer.strip():
        raise ConfigError(footer_key, footer, "a master key id", reason="Parquet encryption always has a footer key")
    known = {kid for kid, _ in kms.master_keys}
    if kms.client == "local":
        for kid in [footer.strip(), *column_keys]:
            if kid not in known:
                raise ConfigError(
                    footer_key if kid == footer.strip() else columns_key,
                    kid,
                    "ids of the local KMS keys: " + ", ".join(sorted(known)),
                )
    return EncryptionSettings(
        kms=kms,
        footer_key=footer.strip(),
        column_keys=tuple((kid, tuple(cols)) for kid, cols in column_keys.items()),
        plaintext_footer=_flag(conf, ENCRYPTION_PREFIX + "plaintext.footer", True),
        double_wrapping=_flag(conf, ENCRYPTION_PREFIX + "double.wrapping", True),
    )


def _client_factory(kms: KmsSettings) -> Callable[[pe.KmsConnectionConfig], pe.KmsClient]:
    if kms.client == "local":
        keys = dict(kms.master_keys)
        return lambda _config: LocalKmsClient(keys)
    if callable(kms.client):
        return kms.client
    module, name = _class_path(kms.client) or ("", "")
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(KMS_PREFIX + "client", kms.client, "an importable module:Class", reason=str(exc)) from exc
    if not callable(factory):
        raise ConfigError(KMS_PREFIX + "client", kms.client, "a class or function building a KmsClient")
    return cast("Callable[[pe.KmsConnectionConfig], pe.KmsClient]", factory)


# One CryptoFactory per KMS settings per process: it caches the KMS clients and the keys it
# unwrapped (for cache_lifetime_s), which is what makes per-segment properties cheap.
_factories: dict[KmsSettings, tuple[pe.CryptoFactory, pe.KmsConnectionConfig]] = {}
_decryption: dict[KmsSettings, pe.FileDecryptionProperties] = {}
_lock = threading.Lock()


def _factory(kms: KmsSettings) -> tuple[pe.CryptoFactory, pe.KmsConnectionConfig]:
    with _lock:
        found = _factories.get(kms)
        if found is None:
            config = pe.KmsConnectionConfig(
                kms_instance_id=kms.instance_id,
                kms_instance_url=kms.instance_url,
                key_access_token=kms.access_token,
                custom_kms_conf=dict(kms.custom),
            )
            found = _factories[kms] = (pe.CryptoFactory(_client_factory(kms)), config)
        return found


def encryption_properties(settings: EncryptionSettings) -> pe.FileEncryptionProperties:
    """Fresh properties for one file (new data keys, wrapped by the KMS or a cached KEK).

    Raises:
        ConfigError: the KMS client cannot be imported.
        OSError / pyarrow errors: the KMS refused to wrap a key.
    """
    factory, config = _factory(settings.kms)
    lifetime = dt.timedelta(seconds=settings.kms.cache_lifetime_s)
    return factory.file_encryption_properties(
        config,
        pe.EncryptionConfiguration(
            footer_key=settings.footer_key,
            column_keys={kid: list(cols) for kid, cols in settings.column_keys},
            plaintext_footer=settings.plaintext_footer,
            double_wrapping=settings.double_wrapping,
            cache_lifetime=lifetime,
        ),
    )


def decryption_properties(kms: KmsSettings | None) -> pe.FileDecryptionProperties | None:
    """Properties that read encrypted and plaintext files alike, or ``None`` without ``kms``."""
    if kms is None:
        return None
    with _lock:
        found = _decryption.get(kms)
    if found is None:
        factory, config = _factory(kms)
        found = factory.file_decryption_properties(
            config, pe.DecryptionConfiguration(cache_lifetime=dt.timedelta(seconds=kms.cache_lifetime_s))
        )
        with _lock:
            _decryption[kms] = found
    return found


def spark_hadoop_conf(kms: KmsSettings) -> dict[str, str]:
    """Hadoop settings that make parquet-mr (Spark, delta-spark) decrypt with the same keys.

    Only the local KMS has a parquet-mr twin (``InMemoryKMS``, same key list); another KMS needs
    its own Java ``KmsClient`` class, set by the user as ``parquet.encryption.kms.client.class``.

    Raises:
        ConfigError: ``kms`` is not the local KMS.
    """
    if kms.client != "local":
        raise ConfigError(
            KMS_PREFIX + "client",
            kms.client,
            "local",
            reason="for another KMS, set spark.hadoop.parquet.encryption.kms.client.class to its Java client",
        )
    key_list = ",".join(f"{kid}:{base64.b64encode(key).decode()}" for kid, key in kms.master_keys)
    return {
        "parquet.crypto.factory.class": PROPERTIES_DRIVEN_FACTORY,
        "parquet.encryption.kms.client.class": IN_MEMORY_KMS,
        "parquet.encryption.key.list": key_list,
        "parquet.encryption.cache.lifetime.seconds": str(int(kms.cache_lifetime_s)),
    }
