"""What a setting is: :class:`Setting` (one thing an operator can set, declared once), the
settings object's fields and checks (:func:`declared`, :func:`validate`, :class:`DaemonSettings`)
and :class:`SettingsParser` (flags and ``PARKA_*`` variables from the declarations). The settings
themselves are in :mod:`parka.ops.settings`, which says how they are read. Standard library only.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from parka.errors import ConfigError

from .cli_util import parse_pairs, redacted, redacted_repr, size_text

__all__ = ["DaemonSettings", "Kind", "Setting", "SettingsParser", "declared", "validate"]

Kind = Literal["value", "positional", "switch", "pairs"]
"""How a setting appears on the command line: ``--flag VALUE``; a positional argument; a flag
without a value (its variable ``1``/``true`` or ``0``/``false``); a repeatable ``KEY=VALUE`` flag
(its variable comma-separated, the flags' pairs after it), read into a dict."""

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting: where it comes from, what it means and what it allows.

    ``parse`` turns the command line's or the variable's text into the value (raising
    ``ValueError`` or ``argparse.ArgumentTypeError`` with a message that says why); ``check``
    returns ``None`` for an allowed value, else what would be allowed (or raises
    :class:`~parka.errors.ConfigError` itself for a richer message). ``None`` is never checked: it
    means "not set". ``choices`` is a check too.
    """

    name: str
    flags: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    help: str = ""
    default: Any = None
    parse: Callable[[str], Any] | None = None
    check: Callable[[Any], str | None] | None = None
    choices: tuple[str, ...] = ()
    kind: Kind = "value"
    metavar: str | None = None
    unit: str = ""
    default_text: str | None = None

    @property
    def env_vars(self) -> tuple[str, ...]:
        return tuple(f"PARKA_{e}" for e in self.env)

    @property
    def flag(self) -> str:
        """Its main flag: the first long one (``--kafka`` of ``-k``, ``--kafka``); a positional
        argument's name in capitals."""
        return next((f for f in self.flags if f.startswith("--")), self.name.upper())

    @property
    def label(self) -> str:
        """How an operator sets it: ``--checkpoint-interval or PARKA_CHECKPOINT_INTERVAL``."""
        return " or ".join((self.flag, *self.env_vars))

    def but(self, **changes: Any) -> Setting:
        """This setting with some of its declaration changed (a daemon's own help or default)."""
        return dataclasses.replace(self, **changes)

    def error(self, value: Any, allowed: str, *, reason: str | None = None) -> ConfigError:
        """A :class:`ConfigError` naming the field, the flag and variable, and the (masked) value."""
        shown = redacted(value) if isinstance(value, Mapping) else redacted({self.name: value})[self.name]
        why = f"set by {self.label}" + (f"; {reason}" if reason else "")
        return ConfigError(self.name, shown, allowed, reason=why)

    def validate(self, value: Any) -> None:
        """Raises :class:`ConfigError` (see :meth:`error`) when ``value`` is not allowed."""
        if value is None:
            return
        if self.choices and value not in self.choices:
            raise self.error(value, " | ".join(self.choices))
        if self.check is not None:
            allowed = self.check(value)
            if allowed is not None:
                raise self.error(value, allowed)

    def read(self, text: str) -> Any:
        """The value of a flag's or variable's ``text``.

        Raises:
            ValueError: (or ``argparse.ArgumentTypeError``) text that is not such a value.
        """
        if self.kind == "switch":
            if text.strip().lower() not in (*_TRUE, *_FALSE):
                raise ValueError(f"{text!r} is neither 1/true nor 0/false")
            return text.strip().lower() in _TRUE
        return self.parse(text) if self.parse is not None else text

    def default_shown(self) -> str:
        """What ``--help`` says of the default: ``required`` (a positional argument), ``no
        default``, ``default: off`` (a switch) or ``default: <value> <unit>``."""
        if self.default_text is not None:
            return f"default: {self.default_text}"
        value = self.default
        if self.kind == "positional" and value is None:
            return "required"
        if self.kind == "switch":
            return f"default: {'on' if value else 'off'}"
        if value is None or (isinstance(value, (dict, list, tuple)) and not value):
            return "no default"
        if self.unit == "bytes":
            return f"default: {size_text(value)}"
        if isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        elif isinstance(value, float) and value.is_integer():
            value = int(value)
        return f"default: {value} {self.unit}".rstrip()

    def env_shown(self) -> str | None:
        """How ``--help`` names its variables (``env: PARKA_KAFKA``), ``None`` without one."""
        if not self.env_vars:
            return None
        if self.kind == "pairs":
            return f"env: {' or '.join(self.env_vars)}, comma-separated"
        if self.kind == "switch":
            return "env: " + " or ".join(f"{e}=1" for e in self.env_vars)
        return "env: " + " or ".join(self.env_vars)

    def help_text(self) -> str:
        """Its ``--help`` text: the help, then the default and the variable in parentheses, both
        made from the declaration (``seconds ... committed (default: 30 s; env:
        PARKA_ALLOWED_LATENCY)``)."""
        shown = "; ".join(x for x in (self.default_shown(), self.env_shown()) if x)
        return f"{self.help} ({shown})" if self.help else shown[:1].upper() + shown[1:]


def declared(setting: Setting, *, required: bool = False) -> Any:
    """A settings dataclass's field for ``setting``: its default (none when ``required``), and the
    declaration in the field's metadata, where :func:`validate` finds it."""
    meta = {"setting": setting}
    if required:
        return dataclasses.field(metadata=meta)
    default = setting.default
    if isinstance(default, (dict, list)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def validate(settings: Any) -> None:
    """Check every field of a settings dataclass that carries a :class:`Setting`, in field order.

    Raises:
        ConfigError: the first value not allowed, naming its field, flag and variable.
    """
    for f in dataclasses.fields(settings):
        setting = f.metadata.get("setting")
        if setting is not None:
            setting.validate(getattr(settings, f.name))


class DaemonSettings:
    """The base of a daemon's settings dataclass (declared with ``repr=False``, with ``topic`` and
    ``table_uri`` fields): its repr masks what Kafka client settings and storage options hold
    (credentials), and :meth:`__post_init__` runs the checks every daemon's settings get."""

    topic: str
    table_uri: str

    def __repr__(self) -> str:
        return redacted_repr(self)

    def __post_init__(self) -> None:
        """Raises :class:`ConfigError`: no topic or table, or a value its declaration refuses."""
        if not self.topic or not self.table_uri:
            raise ConfigError("topic/table_uri", (self.topic, self.table_uri), "a topic and a table URI")
        validate(self)


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()  # a flag's default: not given on the command line

EPILOG = (
    "Each flag shows its default and its environment variable (env:), which is read when the flag is not "
    "given; an empty variable counts as unset."
)
"""What every command's ``--help`` ends with: how to read the parentheses after each flag."""


class SettingsParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose arguments come from :class:`Setting` declarations. After
    parsing, each setting's value is the flag's, else its variable's, else its default; then it is
    checked. A bad value exits 2 (argparse's usage error) naming the flag, the variable and the
    value."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EPILOG)
        super().__init__(*args, **kwargs)
        self.settings: dict[str, Setting] = {}

    def add_settings(self, settings: Iterable[Setting], *, title: str | None = None) -> None:
        """Add a flag (or positional argument) for each setting, in a titled group when given."""
        target: argparse.ArgumentParser | argparse._ArgumentGroup = self.add_argument_group(title) if title else self
        for s in settings:
            if s.name in self.settings:
                raise ValueError(f"setting {s.name!r} added twice")
            self.settings[s.name] = s
            kwargs: dict[str, Any] = {"help": s.help_text().replace("%", "%%"), "default": _UNSET}
            if s.kind == "positional":  # shown as TOPIC, as the errors and docs name it
                target.add_argument(s.name, nargs="?", metavar=s.flag, **kwargs)
                continue
            kwargs["dest"] = s.name
            if s.kind == "switch":
                kwargs["action"] = "store_true"
            elif s.kind == "pairs":
                kwargs.update(action="append", default=None, metavar=s.metavar or "KEY=VALUE")
            else:
                kwargs["type"] = _argument_type(s)
                if s.choices:
                    kwargs["choices"] = s.choices
                else:  # named after the flag, not the field: --allowed-latency ALLOWED_LATENCY
                    kwargs["metavar"] = s.metavar or s.flag.lstrip("-").replace("-", "_").upper()
            target.add_argument(*s.flags, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, rest = super().parse_known_args(args, namespace)
        for s in self.settings.values():
            setattr(ns, s.name, self._resolve(s, getattr(ns, s.name, _UNSET)))
        return ns, rest

    def _resolve(self, s: Setting, given: Any) -> Any:
        source, text = s.label, None
        for var in s.env_vars:
            if os.environ.get(var):  # an empty variable (compose's ${VAR:-}) is not set
                source, text = f"{var} (for {s.flag})", os.environ[var]
                break
        if s.kind == "pairs":
            source = s.label  # the variable's pairs, then the flags'
        try:
            if s.kind == "pairs":
                from_env = [p for p in text.split(",") if p] if text else []
                value = parse_pairs([*from_env, *(given or [])])
            elif given is not _UNSET:
                value = given
            elif text is not None:
                value = s.read(text)
            else:
                value = s.default
        except (ValueError, argparse.ArgumentTypeError) as exc:
            self.error(f"{source}: {exc}")
        try:
            s.validate(value)
        except ConfigError as exc:  # a check's own error may not name the flag: then say where it came from
            message = str(exc)
            self.error(message if s.label in message else f"{source}: {message}")
        return value


def _argument_type(s: Setting) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return s.read(text)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = s.name
    return parse
