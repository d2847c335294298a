"""Reading configurations: TOML files, keyword values and ``--set`` overrides into typed settings.

:func:`load_config` builds a :class:`~fedgraphrec.training.config.TrainConfig`, :func:`load_settings` any
settings dataclass (P4GCN's :class:`~fedgraphrec.protocols.p4gcn.settings.P4GCNSettings`, DGREC's run
settings);
both report an unknown key or a value of the wrong type with the file and line or the ``--set``
argument.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

from fedgraphrec.training.config import ALIASES, BACKBONES, ConfigError, TrainConfig

__all__ = ["load_config", "load_settings"]


_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}


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
    if origin is dict:
        return isinstance(value, dict), value
    if isinstance(annotation, types.UnionType):
        for arm in typing.get_args(annotation):
            ok, conv = _type_ok(value, arm)
            if ok:
                return ok, conv
        return False, value
    return True, value


def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(TrainConfig)


def _apply(cfg: TrainConfig, key: str, value: Any, where: str) -> None:
    hints = _field_types()
    key = ALIASES.get(key, key)
    if key.startswith("dataset_options."):
        cfg.dataset_options[key.split(".", 1)[1]] = value
        return
    if key not in _FIELDS:
        valid = ", ".join(sorted([*_FIELDS, *ALIASES]))
        raise ConfigError(f"{where}: unknown key {key!r}; valid keys: {valid}")
    ok, converted = _type_ok(value, hints[key])
    if not ok:
        raise ConfigError(f"{where}: {key} expects {_describe(hints[key])}, got {value!r}")
    setattr(cfg, key, converted)


def _describe(annotation: Any) -> str:
    return getattr(annotation, "__name__", str(annotation))


def _line_of(text: str, key: str) -> int | None:
    for n, line in enumerate(text.splitlines(), start=1):
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return n
    return None


def _parse_override(item: str) -> tuple[str, Any]:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value")
    key, raw = (s.strip() for s in item.split("=", 1))
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # bare words are strings: --set model=lightgcn
    return key, value


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    base: TrainConfig | None = None,
    **values: Any,
) -> TrainConfig:
    """Build a validated :class:`TrainConfig`.

    Precedence (lowest first): ``base`` (or the defaults), the TOML file at ``path``, keyword
    ``values`` (used by the CLI's named options), then ``overrides`` (``["key=value", ...]``).

    Raises:
        ConfigError: on a missing or malformed file, an unknown key, a value of the wrong type, or an
            out-of-range value; the message names the file and line or the ``--set`` argument.
    """
    cfg = dataclasses.replace(base) if base is not None else TrainConfig()
    cfg.dataset_options = dict(cfg.dataset_options)
    given: set[str] = set()  # keys some source set (the backbone follows the protocol unless given)
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise ConfigError(f"{p}: cannot read config ({exc.strerror})") from exc
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{p}: {exc}") from exc
        for key, value in data.items():
            line = _line_of(text, key)
            where = f"{p}:{line}" if line else str(p)
            if key == "dataset_options":
                if not isinstance(value, dict):
                    raise ConfigError(f"{where}: dataset_options must be a table")
                cfg.dataset_options.update(value)
                continue
            _apply(cfg, key, value, where)
            given.add(key)
    for key, value in values.items():
        if value is not None:
            _apply(cfg, key, value, f"option --{key.replace('_', '-')}")
            given.add(key)
    for item in overrides or []:
        key, value = _parse_override(item)
        _apply(cfg, key, value, f"--set {item}")
        given.add(key)
    if base is None and "model" not in given:
        cfg.model = BACKBONES.get(cfg.protocol, "lightgcn")
    try:
        cfg.validate()
    except ConfigError as exc:
        origin = f"{path}: " if path is not None else ""
        raise ConfigError(f"{origin}{exc}") from None
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
