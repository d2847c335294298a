"""A party's typed state as named arrays, so a node can keep it between messages on any engine.

A client program keeps its state in a dataclass (user rows, Adam moments, keys, routing tables).
The in-process engine keeps the object; Flower starts a ClientApp per message and keeps only
``context.state``, a record of arrays. :func:`state_to_arrays` and :func:`state_from_arrays` convert
between the two, field by field, without pickling: every field is a NumPy array, a torch tensor, a
scalar (``int``, ``float``, ``bool``, ``str``), ``bytes``, ``None``, or a nested dataclass of those.

A field that holds key material (a group key, private keys, a secure-aggregation session's secrets)
is declared with ``field(..., metadata=SECRET)``; :func:`secret_fields` names them, so whoever writes
the state outside the node (the training loop's checkpoint) can keep them out of the clear.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Any, TypeVar

import numpy as np
import torch

__all__ = ["SECRET", "StateError", "empty_ids", "secret_fields", "state_from_arrays", "state_to_arrays"]

T = TypeVar("T")
_SEP = "."
_TENSOR = "~tensor"
_SCALARS = "~scalars"
SECRET: dict[str, bool] = {"secret": True}
"""Field metadata of a state field holding key material (``field(default=b"", metadata=SECRET)``)."""


class StateError(TypeError):
    """A state field has a type that cannot be stored as arrays, or stored arrays do not match."""


def empty_ids() -> np.ndarray:
    """An empty int64 array: the default of a state's (or a plan's) field of ids, positions or counts."""
    return np.zeros(0, dtype=np.int64)


def state_to_arrays(state: Any) -> dict[str, np.ndarray]:
    """Every field of the dataclass ``state`` as named arrays (scalars in one JSON entry)."""
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    _flatten(state, "", arrays, scalars)
    arrays[_SCALARS] = np.frombuffer(json.dumps(scalars, sort_keys=True).encode(), dtype=np.uint8).copy()
    return arrays


def _flatten(obj: Any, prefix: str, arrays: dict[str, np.ndarray], scalars: dict[str, Any]) -> None:
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise StateError(f"state must be a dataclass instance, got {type(obj).__name__}")
    for f in dataclasses.fields(obj):
        name = prefix + f.name
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            _flatten(value, name + _SEP, arrays, scalars)
        elif isinstance(value, torch.Tensor):
            arrays[name + _TENSOR] = value.detach().cpu().contiguous().numpy().copy()
        elif isinstance(value, np.ndarray):
            arrays[name] = np.ascontiguousarray(value)
        elif isinstance(value, bytes | bytearray):
            arrays[name] = np.frombuffer(bytes(value), dtype=np.uint8).copy()
            scalars[name] = "~bytes"
        elif value is None or isinstance(value, bool | int | float | str):
            scalars[name] = value
        else:
            raise StateError(f"state field {name!r}: cannot store a {type(value).__name__}")


def state_from_arrays(cls: type[T], arrays: dict[str, np.ndarray]) -> T:
    """Rebuild a ``cls`` instance from :func:`state_to_arrays`'s output.

    Raises:
        StateError: a field is missing from ``arrays``.
    """
    if _SCALARS not in arrays:
        raise StateError("stored state has no scalar entry; it was not written by state_to_arrays")
    try:
        scalars = json.loads(_raw_bytes(arrays[_SCALARS], _SCALARS).decode())
    except ValueError:
        raise StateError(f"stored state: {_SCALARS!r} is not valid JSON") from None
    if not isinstance(scalars, dict):
        raise StateError(f"stored state: {_SCALARS!r} must be a JSON object")
    return typing.cast(T, _build(cls, "", arrays, scalars))


def _raw_bytes(arr: np.ndarray, name: str) -> bytes:
    """The bytes a field was stored as (a 1-d ``uint8`` array; nothing else is cast into bytes)."""
    if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8 or arr.ndim != 1:
        raise StateError(f"stored state field {name!r}: bytes are stored as a 1-d uint8 array")
    return arr.tobytes()


def _build(cls: type, prefix: str, arrays: dict[str, np.ndarray], scalars: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        name = prefix + f.name
        hint = hints.get(f.name)
        sub = _dataclass_in(hint)
        nested = sub is not None and any(k.startswith(name + _SEP) for k in (*arrays, *scalars))
        if sub is not None and nested:
            kwargs[f.name] = _build(sub, name + _SEP, arrays, scalars)
        elif name + _TENSOR in arrays:
            kwargs[f.name] = torch.from_numpy(np.array(arrays[name + _TENSOR], copy=True))
        elif scalars.get(name) == "~bytes":
            if name not in arrays:
                raise StateError(f"stored state has no bytes of field {name!r}")
            kwargs[f.name] = _raw_bytes(arrays[name], name)
        elif name in arrays:
            kwargs[f.name] = np.array(arrays[name], copy=True)
        elif name in scalars:
            kwargs[f.name] = scalars[name]
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        else:
            raise StateError(f"stored state has no field {name!r}")
    return cls(**kwargs)


def secret_fields(cls: type) -> list[str]:
    """The array names (as :func:`state_to_arrays` writes them) of ``cls``'s fields marked :data:`SECRET`.

    Nested dataclasses are searched too (``"secagg.clients"``). A secret field holding a tensor is
    named with its tensor suffix, so the names match the keys of :func:`state_to_arrays`'s output.
    """
    out: list[str] = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        sub = _dataclass_in(hints.get(f.name))
        if f.metadata.get("secret"):
            out += [f.name, f.name + _TENSOR]
        elif sub is not None:
            out += [f.name + _SEP + name for name in secret_fields(sub)]
    return out


def _dataclass_in(hint: Any) -> type | None:
    """The dataclass type in ``hint`` (``X`` or ``X | None``), if any."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return hint
    for arg in typing.get_args(hint):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg
    return None
