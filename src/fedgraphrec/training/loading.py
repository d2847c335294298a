"""Reading configurations: TOML files, keyword values and ``--set`` overrides into typed settings.

:func:`load_config` builds a :class:`~fedgraphrec.training.config.TrainConfig`: run fields at the top of
the file, an ``[eval]`` table, and a ``[protocol]`` table with ``name`` and the protocol's settings
(its dataclass in :mod:`fedgraphrec.protocols.registry`)::

    dataset = "gowalla"
    epochs = 400

    [eval]
    ks = [20]

    [protocol]
    name = "lpgcn"
    alpha = 5

On the command line ``--set protocol.alpha=5`` and ``--set eval.ks=[5,20]`` name the table;
a bare key that belongs to exactly one place is a shorthand (``--set alpha=5``, ``--set ks=[5,20]``).
In a file a protocol or evaluation key at the top level is an error that names the table it
belongs in. :func:`load_settings` builds any other settings dataclass. Both report an unknown key
or a value of the wrong type with the file and line or the ``--set`` argument.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import tomli_w

from fedgraphrec.protocols.registry import REGISTRY, lookup
from fedgraphrec.protocols.settings import ProtocolSettings, settings_fields
from fedgraphrec.training.config import ConfigError, EvalSettings, TrainConfig

__all__ = ["config_from_dict", "load_config", "load_settings"]

_RUN = {f.name for f in dataclasses.fields(TrainConfig) if f.name not in ("protocol", "eval", "settings")}
_EVAL = {f.name for f in dataclasses.fields(EvalSettings)}
_TABLES = ("eval", "protocol", "dataset_options")


def _type_ok(value: Any, annotation: Any) -> tuple[bool, Any]:
    """Check ``value`` against a field annotation; ints are accepted (and converted) for floats."""
    origin = typing.get_origin(annotation)
    if annotation is bool:
        return isinstance(value, bool), value
    if annotation is type(None):  # the unset arm of an optional field (``bool | None``)
        return value is None, value
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if annotation is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return ok, float(value) if ok else value
    if annotation is str:
        return isinstance(value, str), value
    if origin is list:
        (inner,) = typing.get_args(annotation)
        if not isinstance(value, list):
            return False, value
        pairs = [_type_ok(v, inner) for v in value]
        return all(p[0] for p in pairs), [p[1] for p in pairs]
    if origin is tuple:  # settings keep widths as tuples; TOML gives lists
        (inner, _) = typing.get_args(annotation)
        ok, conv = _type_ok(value, list[inner])  # type: ignore[valid-type]
        return ok, tuple(conv) if ok else value
    if origin is dict:
        return isinstance(value, dict), value
    if isinstance(annotation, types.UnionType):
        for arm in typing.get_args(annotation):
            ok, conv = _type_ok(value, arm)
            if ok:
                return ok, conv
        return False, value
    return True, value


def _describe(annotation: Any) -> str:
    return getattr(annotation, "__name__", str(annotation))


def _line_of(text: str, key: str) -> int | None:
    for n, line in enumerate(text.splitlines(), start=1):
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return n
    return None


def _toml_value(value: Any) -> str:
    """``value`` as it is written in TOML (``5``, ``[5, 20]``, ``"mf"``), on one line."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return tomli_w.dumps({"v": value}).strip().removeprefix("v = ")


def _parse_override(item: str) -> tuple[str, Any]:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value")
    key, raw = (s.strip() for s in item.split("=", 1))
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # bare words are strings: --set model=lightgcn
    return key, value


Assignment = tuple[str, str, Any, str, bool]
"""``(table, key, value, where, shared)``: table ``""`` (run), ``eval``, ``protocol``,
``dataset_options``, ``top`` (a file's top-level key that is not a run field) or ``?`` (a bare
command-line key, placed once the protocol is known). A *shared* protocol key (from a file whose
``[protocol]`` table names no protocol, or from ``shared`` overrides) is skipped by a protocol that
lacks it when another registered protocol has it: one base file serves several protocols."""


def _table_assignments(data: dict[str, Any], where_of: Any, origin: str) -> list[Assignment]:
    """The assignments of a parsed TOML file (or its JSON twin): run keys, then the tables."""
    out: list[Assignment] = []
    for key, value in data.items():
        if key in _TABLES and not (key == "protocol" and isinstance(value, str)):
            if not isinstance(value, dict):
                raise ConfigError(f"{where_of(key)}: {key} must be a table ([{key}])")
            shared = key == "protocol" and "name" not in value
            out.extend((key, k, v, where_of(k), shared) for k, v in value.items())
        elif key in _RUN or (key == "protocol" and isinstance(value, str)):  # `protocol = "x"` names it
            out.append(("", key, value, where_of(key), False))
        else:
            out.append(("top", key, value, where_of(key), False))  # misplaced or unknown: told once known
    return out


def _protocol_of(assignments: Iterable[Assignment], default: str) -> str:
    name = default
    for table, key, value, where, _ in assignments:
        if (
            (table == "protocol" and key == "name")
            or (table in ("", "?") and key == "protocol")
            or (table == "?" and key == "protocol.name")
        ):
            if not isinstance(value, str):
                raise ConfigError(f"{where}: protocol expects str, got {value!r}")
            name = value
    return name


def _settings_keys(cls: type[ProtocolSettings]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in settings_fields(cls)}


def _close(key: str, keys: Iterable[str]) -> str:
    near = difflib.get_close_matches(key, list(keys), n=4, cutoff=0.6)
    return f"; close matches: {', '.join(near)}" if near else ""


class _Builder:
    """Collects the values of one configuration, each checked against the table it belongs to."""

    def __init__(self, base: TrainConfig | None, protocol: str) -> None:
        try:
            self.entry = lookup(protocol)
        except KeyError as exc:
            raise ConfigError(str(exc.args[0])) from None
        self.cls = self.entry.settings
        self.keys = _settings_keys(self.cls)
        self.aliases = dict(self.cls.ALIASES)
        self.run_hints = typing.get_type_hints(TrainConfig)
        self.eval_hints = typing.get_type_hints(EvalSettings)
        start = base if base is not None else TrainConfig()
        self.run: dict[str, Any] = {k: getattr(start, k) for k in _RUN}
        self.run["dataset_options"] = dict(start.dataset_options)
        self.eval: dict[str, Any] = dataclasses.asdict(start.eval)
        if base is None or base.protocol != protocol:
            self.eval["metric"] = ""  # the protocol's kind decides unless the configuration names one
        self.settings: dict[str, Any] = {}
        if base is not None and base.protocol == protocol:
            self.settings = {k: getattr(base.settings, k) for k in self.keys}

    def _elsewhere(self, key: str) -> bool:
        """Whether ``key`` is no key of this run but a setting of another registered protocol."""
        if key in _RUN or key in _EVAL or "." in key or self.aliases.get(key, key) in self.keys:
            return False
        return any(
            e.settings.ALIASES.get(key, key) in {f.name for f in settings_fields(e.settings)}
            for e in REGISTRY.values()
        )

    def _check(self, key: str, value: Any, annotation: Any, where: str) -> Any:
        ok, converted = _type_ok(value, annotation)
        if not ok:
            raise ConfigError(f"{where}: {key} expects {_describe(annotation)}, got {value!r}")
        return converted

    def _unknown(self, key: str, where: str) -> ConfigError:
        everything = [*_RUN, *_EVAL, *self.keys, *self.aliases]
        return ConfigError(
            f"{where}: unknown key {key!r} (protocol {self.entry.name}){_close(key, everything)}"
        )

    def put(self, table: str, key: str, value: Any, where: str, shared: bool = False, path: str = "") -> None:
        """Apply one assignment (``path``: the file, for the error on a misplaced top-level key)."""
        name = self.entry.name
        if shared and table in ("?", "protocol") and self._elsewhere(key):
            return
        if table == "top":  # a key at the top of a file that is not a run field
            place = "eval" if key in _EVAL else "protocol" if self.aliases.get(key, key) in self.keys else ""
            if not place:
                raise self._unknown(key, where)
            what = f"a setting of protocol {name}" if place == "protocol" else "an evaluation setting"
            assignment = f"{key} = {_toml_value(value)}"
            raise ConfigError(f"{path or where}: `{key}` is {what}; put it under [{place}] as `{assignment}`")
        if table == "?":  # a bare key: the one place it belongs to
            if key in ("protocol", "protocol.name"):
                return
            if key.startswith("dataset_options."):
                table, key = "dataset_options", key.split(".", 1)[1]
            elif "." in key:
                table, _, key = key.partition(".")
                if table not in ("eval", "protocol"):
                    raise ConfigError(f"{where}: unknown table {table!r} (eval, protocol or dataset_options)")
            elif key in _RUN:
                table = ""
            elif key in _EVAL:
                table = "eval"
            elif self.aliases.get(key, key) in self.keys:
                table = "protocol"
            else:
                raise self._unknown(key, where)
        if table == "dataset_options":
            self.run["dataset_options"][key] = value
        elif table == "":
            if key != "protocol":
                self.run[key] = self._check(key, value, self.run_hints[key], where)
        elif table == "eval":
            if key not in _EVAL:
                raise ConfigError(f"{where}: unknown key {key!r} in [eval]{_close(key, _EVAL)}")
            self.eval[key] = self._check(key, value, self.eval_hints[key], where)
        else:
            if key == "name":
                return
            field_name = self.aliases.get(key, key)
            if field_name not in self.keys:
                raise ConfigError(
                    f"{where}: {key!r} is not a setting of protocol {name}"
                    f"{_close(key, [*self.keys, *self.aliases])} (fedgraphrec train {name} --help lists them)"
                )
            self.settings[field_name] = self._check(field_name, value, self.keys[field_name], where)

    def build(self) -> TrainConfig:
        try:
            settings = self.cls.from_values(self.settings)
        except ValueError as exc:
            raise ConfigError(f"protocol {self.entry.name}: {exc}") from None
        try:
            evaluation = EvalSettings(**self.eval)
        except TypeError as exc:
            raise ConfigError(str(exc)) from None
        return TrainConfig(protocol=self.entry.name, **self.run, eval=evaluation, settings=settings)


def _read_toml(p: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config ({exc.strerror})") from exc
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: {exc}") from exc


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    base: TrainConfig | None = None,
    *,
    shared: Iterable[str] = (),
    **values: Any,
) -> TrainConfig:
    """Build a validated :class:`TrainConfig`.

    Precedence (lowest first): ``base`` (or the defaults), the TOML file at ``path``, keyword
    ``values`` (used by the CLI's named options; a key as in ``--set``), then ``shared`` overrides
    (a base for several protocols: a setting this protocol lacks but another has is skipped), then
    ``overrides`` (``["key=value", ...]``, module docstring). The protocol is decided first (the
    last source that names it), then every other key is checked against the run fields, ``[eval]`` or
    that protocol's settings.

    Raises:
        ConfigError: on a missing or malformed file, an unknown or misplaced key, a value of the
            wrong type, or an out-of-range value; the message names the file and line or the
            ``--set`` argument.
    """
    assignments: list[Assignment] = []
    if path is not None:
        p = Path(path)
        text, data = _read_toml(p)

        def where_of(key: str) -> str:
            line = _line_of(text, key)
            return f"{p}:{line}" if line else str(p)

        assignments += _table_assignments(data, where_of, str(p))
    for key, value in values.items():
        if value is not None:
            assignments.append(("?", key, value, f"option --{key.replace('_', '-')}", False))
    for items, is_shared in ((shared, True), (overrides or [], False)):
        for item in items:
            key, value = _parse_override(item)
            assignments.append(("?", key, value, f"--set {item}", is_shared))
    builder = _Builder(base, _protocol_of(assignments, base.protocol if base else TrainConfig.protocol))
    for table, key, value, where, is_shared in assignments:
        builder.put(table, key, value, where, is_shared, str(path) if path is not None else "")
    cfg = builder.build()
    try:
        cfg.validate()
    except ConfigError as exc:
        origin = f"{path}: " if path is not None else ""
        raise ConfigError(f"{origin}{exc}") from None
    return cfg


def config_from_dict(data: dict[str, Any]) -> TrainConfig:
    """A :class:`TrainConfig` from :meth:`TrainConfig.to_dict`'s layout (e.g. JSON sent to a node)."""
    assignments = _table_assignments(data, lambda key: f"config[{key!r}]", "config")
    builder = _Builder(None, _protocol_of(assignments, TrainConfig.protocol))
    for table, key, value, where, is_shared in assignments:
        builder.put(table, key, value, where, is_shared)
    cfg = builder.build()
    cfg.validate()
    return cfg


S = typing.TypeVar("S")


def load_settings(
    cls: type[S], path: str | Path | None = None, overrides: list[str] | None = None, **values: Any
) -> S:
    """A settings dataclass from its defaults, a TOML file, keyword ``values`` and ``--set`` overrides.

    Precedence is that order (e.g. :class:`~fedgraphrec.protocols.p4gcn.settings.P4GCNSettings`). TOML keys
    that belong to the run rather than to ``cls`` (``protocol``, ``dataset``, ``seed``) are skipped.

    Raises:
        ConfigError: an unknown key or a value of the wrong type (naming the file and line or the
            ``--set`` argument), or a value the dataclass's own checks refuse.
    """
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    chosen: dict[str, Any] = {}

    def put(key: str, value: Any, where: str) -> None:
        if key not in fields:
            raise ConfigError(f"{where}: unknown key {key!r}; valid keys: {', '.join(sorted(fields))}")
        ok, converted = _type_ok(value, hints[key])
        if not ok:
            raise ConfigError(f"{where}: {key} expects {_describe(hints[key])}, got {value!r}")
        chosen[key] = converted

    if path is not None:
        p = Path(path)
        try:
            text = p.read_text()
            data = tomllib.loads(text)
        except OSError as exc:
            raise ConfigError(f"{p}: cannot read config ({exc.strerror})") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{p}: {exc}") from exc
        for key, value in data.items():
            if key not in ("protocol", "dataset", "seed"):
                line = _line_of(text, key)
                put(key, value, f"{p}:{line}" if line else str(p))
    for key, value in values.items():
        if value is not None:
            put(key, value, key)
    for item in overrides or []:
        key, value = _parse_override(item)
        put(key, value, f"--set {item!r}")
    try:
        return cls(**chosen)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
