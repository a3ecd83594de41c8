"""Settings text as Spark and Kafka take it: the trigger (``available-now`` or
``processing-time=<n><unit>``), delta-rs storage options as Hadoop's s3a settings, and
librdkafka's ``-K`` settings as the Kafka source's (Java client) options. Pure: no Spark."""

from __future__ import annotations

import re
from collections.abc import Mapping

from parka.errors import ConfigError

__all__ = ["hadoop_storage_options", "kafka_client_options", "trigger_ms"]

# delta-rs storage option -> Hadoop setting, for the options both engines know.
_STORAGE_KEYS = {
    "aws_access_key_id": "fs.s3a.access.key",
    "aws_secret_access_key": "fs.s3a.secret.key",
    "aws_session_token": "fs.s3a.session.token",
    "aws_endpoint_url": "fs.s3a.endpoint",
    "aws_endpoint": "fs.s3a.endpoint",
    "aws_region": "fs.s3a.endpoint.region",
}
# delta-rs storage options s3a has no setting for (see hadoop_storage_options)
_STORAGE_KEYS_FOR_OTHERS = ("aws_allow_http", "aws_conditional_put", "aws_virtual_hosted_style_request")
# Azure's and Google's delta-rs options: for delta-rs and obstore (raw mode's files and commits);
# Spark's own reads of such a table take Hadoop's fs.azure.* / fs.gs.* settings, given as such
_OTHER_CLOUDS = ("azure_", "google_")
_TRIGGER = re.compile(r"processing-time=(\d+(?:\.\d+)?)\s*([a-z]*)")
_UNIT_MS = {
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("", "s", "second", "seconds"), 1000),
    **dict.fromkeys(("m", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hour", "hours"), 3_600_000),
}


def trigger_ms(trigger: str) -> int | None:
    """``None`` for ``available-now``, else the processing-time interval in milliseconds.

    Raises:
        ConfigError: any other form.
    """
    if trigger == "available-now":
        return None
    m = _TRIGGER.fullmatch(trigger.strip())
    if m is None or m.group(2) not in _UNIT_MS:
        raise ConfigError("trigger", trigger, "available-now, processing-time=<n>[ms|s|m|h] (e.g. processing-time=30s)")
    return max(1, int(float(m.group(1)) * _UNIT_MS[m.group(2)]))


def hadoop_storage_options(options: Mapping[str, str]) -> dict[str, str]:
    """Storage options as Hadoop settings (s3a).

    delta-rs' keys in ``_STORAGE_KEYS`` are translated. ``aws_allow_http`` and
    ``aws_conditional_put`` have no s3a setting (s3a takes http from the endpoint URL; it makes
    no conditional puts) and are left to delta-rs and obstore. object_store addresses buckets
    path-style unless ``aws_virtual_hosted_style_request`` is true; s3a is told the same
    (``fs.s3a.path.style.access``) when an endpoint is given, so both reach the same server
    the same way. Azure's and Google's delta-rs keys (``azure_*``, ``google_*``) have no
    translation: Hadoop's own ``fs.azure.*`` / ``fs.gs.*`` keys configure Spark for those. An
    ``fs.*`` key given as such wins.

    Raises:
        ConfigError: a key that is neither ``fs.*`` nor a known delta-rs key.
    """
    out: dict[str, str] = {}
    hosted: str | None = None
    for key, value in options.items():
        name = key.lower()
        if key.startswith("fs."):
            continue
        if name in _STORAGE_KEYS:
            out[_STORAGE_KEYS[name]] = value
        elif name == "aws_virtual_hosted_style_request":
            hosted = value
        elif name not in _STORAGE_KEYS_FOR_OTHERS and not name.startswith(_OTHER_CLOUDS):
            known = (*_STORAGE_KEYS, *_STORAGE_KEYS_FOR_OTHERS)
            allowed = "fs.* Hadoop settings, AZURE_*, GOOGLE_*, " + ", ".join(k.upper() for k in known)
            raise ConfigError("storage option", key, allowed)
    if hosted is not None:
        out["fs.s3a.path.style.access"] = "false" if hosted.strip().lower() == "true" else "true"
    elif "fs.s3a.endpoint" in out:
        out["fs.s3a.path.style.access"] = "true"
    out.update({k: v for k, v in options.items() if k.startswith("fs.")})
    return out


def kafka_client_options(conf: Mapping[str, str]) -> dict[str, str]:
    """``-K`` settings as Kafka source options; librdkafka's ``sasl.username``/``sasl.password``
    become the Java client's ``sasl.jaas.config``, its ``sasl.mechanisms`` ``sasl.mechanism`` and
    its ``ssl.ca.location`` (a PEM file) a PEM trust store, so one set of flags serves both CLIs."""
    conf = dict(conf)
    ca = conf.pop("ssl.ca.location", None)
    if ca is not None and "ssl.truststore.location" not in conf:
        conf["ssl.truststore.type"] = "PEM"
        conf["ssl.truststore.location"] = ca
    user, password = conf.pop("sasl.username", None), conf.pop("sasl.password", None)
    if (user is None) != (password is None):
        raise ConfigError("sasl.username/sasl.password", "one of them", "both or neither")
    if user is not None and "sasl.jaas.config" not in conf:
        mechanism = conf.get("sasl.mechanism", conf.get("sasl.mechanisms", "PLAIN")).upper()
        module = "scram.ScramLoginModule" if mechanism.startswith("SCRAM") else "plain.PlainLoginModule"
        quoted = [v.replace("\\", "\\\\").replace('"', '\\"') for v in (user, password or "")]
        conf["sasl.jaas.config"] = (
            f'org.apache.kafka.common.security.{module} required username="{quoted[0]}" password="{quoted[1]}";'
        )
    if "sasl.mechanisms" in conf:  # librdkafka's spelling
        conf.setdefault("sasl.mechanism", conf.pop("sasl.mechanisms"))
    return {f"kafka.{k}": v for k, v in conf.items()}
