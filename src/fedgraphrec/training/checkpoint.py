"""``checkpoint.pt``: plain data only, loaded without running code, key material never in the clear.

A run folder travels (it is how results are shared), so its checkpoint is untrusted input. Two rules:

* **Loading runs no code.** The file is read with ``torch.load(weights_only=True)``, which
  unpickles only tensors and primitive containers and refuses anything else (a crafted
  ``__reduce__`` that would run a command never runs). Everything a learner's state holds is
  therefore converted to tensors, ``int``/``float``/``str``/``bool``/``None``, lists, tuples and
  dicts first (:func:`to_plain`) and rebuilt after (:func:`from_plain`): NumPy arrays become their
  raw bytes with dtype and shape, ``bytes`` a ``uint8`` tensor, SciPy CSR/CSC matrices their three
  arrays, and the few state objects of the library's own classes (a server's routing plans) their
  attributes, rebuilt only for classes of an already-imported ``fedgraphrec`` module, without
  calling any constructor or ``__setstate__``.
* **No key material in the clear.** A learner's state may carry a top-level ``"secrets"`` entry
  (the fields its party programs declare :data:`~fedgraphrec.runtime.state.SECRET`: the group key
  ``S``, the clients' private keys, open secure-aggregation sessions). Those are encrypted with
  AES-256-GCM under a key the *user* holds, outside the run folder: the 32-byte file named by
  ``$FEDGRAPHREC_CHECKPOINT_KEY_FILE``, by default ``$XDG_CONFIG_HOME/fedgraphrec/checkpoint.key``
  (``~/.config/...``), created with mode ``0600`` the first time a checkpoint has secrets to keep.
  The associated data binds the ciphertext to the checkpoint's configuration.

Why encrypt rather than re-agree the keys on resume, as a deployment would after a restart: in the
in-process engine the whole population's state is one checkpoint, and the protocols' set-up *derives*
structure from the group key (LP-GCN's and GNN4FR's item tokens and the server's column assignment
are keyed by ``S``; FedPerGNN's tokens too). A fresh ``S`` would invalidate every saved routing table
and the resumed run would no longer be the uninterrupted one. Encrypting keeps resume exact and the
run folder free of keys; whoever lacks the user's key file cannot resume (a clear error says so).
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.aead import PayloadCipher
from fedgraphrec.crypto.errors import DecryptionError
from fedgraphrec.crypto.keys import SHARED_KEY_BYTES, SharedKey

__all__ = [
    "FORMAT",
    "KEY_FILE_ENV",
    "SECRETS",
    "CheckpointError",
    "checkpoint_key_file",
    "from_plain",
    "load_checkpoint",
    "save_checkpoint",
    "to_plain",
]

FORMAT = "fedgraphrec-checkpoint/2"
"""The checkpoint layout this module writes (older, pickled checkpoints are refused)."""
KEY_FILE_ENV = "FEDGRAPHREC_CHECKPOINT_KEY_FILE"
"""Environment variable naming the user's checkpoint key file (32 random bytes)."""
SECRETS = "secrets"
"""The learner state's entry that holds key material (encrypted in the file)."""
_TAG = "__fgr__"
_PURPOSE = "checkpoint-secrets"


class CheckpointError(ValueError):
    """A checkpoint cannot be written or is refused on load (the message names the file)."""


# ---------------------------------------------------------------------------- plain data
def _bytes_tensor(data: bytes) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8).copy())


def _tensor_bytes(t: Any, where: str) -> bytes:
    if not isinstance(t, torch.Tensor) or t.dtype != torch.uint8 or t.dim() != 1:
        raise CheckpointError(f"{where}: expected a 1-d uint8 tensor of raw bytes")
    return t.numpy().tobytes()


def to_plain(obj: Any, where: str = "checkpoint") -> Any:
    """``obj`` as tensors and primitive containers only (what ``weights_only=True`` accepts).

    Raises:
        CheckpointError: a value of a type that cannot be stored as plain data (``where`` names it).
    """
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, torch.dtype):
        return {_TAG: "dtype", "name": str(obj).removeprefix("torch.")}
    if isinstance(obj, bytes | bytearray):
        return {_TAG: "bytes", "data": _bytes_tensor(bytes(obj))}
    if isinstance(obj, np.ndarray | np.generic):
        arr = np.asarray(obj)
        if arr.dtype.hasobject or arr.dtype.fields is not None:
            raise CheckpointError(f"{where}: cannot store an array of dtype {arr.dtype}")
        data = _bytes_tensor(np.ascontiguousarray(arr).tobytes())
        kind = "ndarray" if isinstance(obj, np.ndarray) else "scalar"
        return {_TAG: kind, "dtype": arr.dtype.str, "shape": list(arr.shape), "data": data}
    if sp.issparse(obj):
        if obj.format not in ("csr", "csc"):
            raise CheckpointError(f"{where}: cannot store a sparse matrix in {obj.format} format")
        parts = {k: to_plain(getattr(obj, k), where) for k in ("data", "indices", "indptr")}
        kind = "array" if isinstance(obj, sp.sparray) else "matrix"
        return {_TAG: "sparse", "format": obj.format, "kind": kind, "shape": list(obj.shape), **parts}
    if isinstance(obj, tuple):
        return tuple(to_plain(v, f"{where}[{k}]") for k, v in enumerate(obj))
    if isinstance(obj, list):
        return [to_plain(v, f"{where}[{k}]") for k, v in enumerate(obj)]
    if isinstance(obj, dict):
        if _TAG in obj or not all(isinstance(k, str | int) and not isinstance(k, bool) for k in obj):
            items = [[to_plain(k, where), to_plain(v, f"{where}.{k}")] for k, v in obj.items()]
            return {_TAG: "dict", "items": items}
        return {k: to_plain(v, f"{where}.{k}") for k, v in obj.items()}
    cls = type(obj)
    if cls.__module__.startswith("fedgraphrec.") and hasattr(obj, "__dict__"):
        attrs = {k: to_plain(v, f"{where}.{k}") for k, v in vars(obj).items()}
        return {_TAG: "object", "class": f"{cls.__module__}:{cls.__qualname__}", "vars": attrs}
    raise CheckpointError(f"{where}: cannot store a {cls.__module__}.{cls.__qualname__} as plain data")


def _library_class(ref: str, where: str) -> type:
    """A class of an already-imported ``fedgraphrec`` module (nothing is imported from a checkpoint)."""
    module_name, _, qualname = ref.partition(":")
    module = sys.modules.get(module_name)
    if not module_name.startswith("fedgraphrec.") or module is None:
        raise CheckpointError(f"{where}: class {ref!r} is not of a loaded fedgraphrec module")
    obj: Any = module
    for name in qualname.split("."):
        obj = getattr(obj, name, None)
    if not isinstance(obj, type) or obj.__module__ != module_name or not hasattr(obj, "__dict__"):
        raise CheckpointError(f"{where}: {ref!r} is not a state class of the library")
    return obj


def from_plain(tree: Any, where: str = "checkpoint") -> Any:
    """Inverse of :func:`to_plain`.

    Raises:
        CheckpointError: a tagged entry is malformed (``where`` names it).
    """
    if isinstance(tree, list):
        return [from_plain(v, f"{where}[{k}]") for k, v in enumerate(tree)]
    if isinstance(tree, tuple):
        return tuple(from_plain(v, f"{where}[{k}]") for k, v in enumerate(tree))
    if not isinstance(tree, dict):
        return tree
    tag = tree.get(_TAG)
    if tag is None:
        return {k: from_plain(v, f"{where}.{k}") for k, v in tree.items()}
    try:
        return _untag(str(tag), tree, where)
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"{where}: malformed {tag!r} entry ({exc})") from None


def _untag(tag: str, tree: dict[str, Any], where: str) -> Any:
    if tag == "dtype":
        dtype = getattr(torch, str(tree["name"]), None)
        if not isinstance(dtype, torch.dtype):
            raise CheckpointError(f"{where}: {tree['name']!r} is not a torch dtype")
        return dtype
    if tag == "bytes":
        return _tensor_bytes(tree["data"], where)
    if tag in ("ndarray", "scalar"):
        dtype = np.dtype(str(tree["dtype"]))
        if dtype.hasobject or dtype.fields is not None:
            raise CheckpointError(f"{where}: refusing an array of dtype {dtype}")
        shape = tuple(int(n) for n in tree["shape"])
        arr = np.frombuffer(_tensor_bytes(tree["data"], where), dtype=dtype).reshape(shape).copy()
        return arr if tag == "ndarray" else arr[()]
    if tag == "sparse":
        cls = {
            ("csr", "matrix"): sp.csr_matrix,
            ("csc", "matrix"): sp.csc_matrix,
            ("csr", "array"): sp.csr_array,
            ("csc", "array"): sp.csc_array,
        }[(str(tree["format"]), str(tree["kind"]))]
        arrays = [from_plain(tree[k], where) for k in ("data", "indices", "indptr")]
        return cls(tuple(arrays), shape=tuple(int(n) for n in tree["shape"]))
    if tag == "dict":
        return {from_plain(k, where): from_plain(v, f"{where}.{k}") for k, v in tree["items"]}
    if tag == "object":
        cls = _library_class(str(tree["class"]), where)
        obj: Any = object.__new__(cls)
        attrs = from_plain(tree["vars"], where)
        if not isinstance(attrs, dict):
            raise CheckpointError(f"{where}: an object's attributes must be a dict")
        obj.__dict__.update(attrs)  # no constructor, no __setstate__: only data
        if dataclasses.is_dataclass(cls) and {f.name for f in dataclasses.fields(cls)} - set(attrs):
            raise CheckpointError(f"{where}: {cls.__qualname__} is missing fields")
        return obj
    raise CheckpointError(f"{where}: unknown entry tag {tag!r}")


# ---------------------------------------------------------------------------- the user's key
def checkpoint_key_file() -> Path:
    """The user's checkpoint key file (``$FEDGRAPHREC_CHECKPOINT_KEY_FILE`` or the config folder)."""
    given = os.environ.get(KEY_FILE_ENV)
    if given:
        return Path(given).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "fedgraphrec" / "checkpoint.key"


def _user_key(run_folder: Path, create: bool) -> SharedKey:
    path = checkpoint_key_file()
    if path.resolve().is_relative_to(run_folder.resolve()):
        raise CheckpointError(
            f"{path}: the checkpoint key file must not be inside the run folder {run_folder} "
            f"(set {KEY_FILE_ENV} to a file of your own)"
        )
    if not path.exists():
        if not create:
            raise CheckpointError(
                f"{path}: the checkpoint's key material is encrypted under the key in this file, which "
                f"does not exist; resume as the user who wrote it, or set {KEY_FILE_ENV} to that key file"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(SHARED_KEY_BYTES))
    raw = path.read_bytes()
    if len(raw) != SHARED_KEY_BYTES:
        raise CheckpointError(
            f"{path}: a checkpoint key file holds exactly {SHARED_KEY_BYTES} bytes, got {len(raw)}"
        )
    return SharedKey.from_bytes(raw)


def _aad(config: Any) -> bytes:
    return f"{FORMAT}|{json.dumps(config, sort_keys=True, default=str)}".encode()


def _has_bytes(tree: Any) -> bool:
    """Whether a secrets tree holds any byte at all (accounted runs hold empty fields only)."""
    if isinstance(tree, dict):
        return any(_has_bytes(v) for v in tree.values())
    if isinstance(tree, list | tuple):
        return any(_has_bytes(v) for v in tree)
    if isinstance(tree, np.ndarray | torch.Tensor):
        return int(tree.nbytes) > 0
    if isinstance(tree, bytes | bytearray):
        return len(tree) > 0
    return tree is not None


def _dumps(tree: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(tree, buf)
    return buf.getvalue()


def _loads(data: bytes, what: str) -> Any:
    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except Exception as exc:  # a crafted or foreign pickle: refused, never executed
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(
            f"{what}: refusing to load: it is not a plain-data checkpoint of this library "
            f"(older pickled checkpoints and files holding code are not loaded): {first}"
        ) from None


# ---------------------------------------------------------------------------- the file
def save_checkpoint(path: Path, payload: dict[str, Any], secrets: Any) -> None:
    """Write ``payload`` (plain) and ``secrets`` (encrypted under the user's key) to ``path`` atomically.

    Raises:
        CheckpointError: a value cannot be stored, or the key file is inside the run folder.
    """
    body = to_plain(payload)
    if not isinstance(body, dict) or "format" in body or SECRETS in body:
        raise CheckpointError(f"{path}: a checkpoint payload is a dict without 'format' or 'secrets'")
    body["format"] = FORMAT
    if _has_bytes(secrets):
        cipher = PayloadCipher(_user_key(path.parent, create=True), purpose=_PURPOSE)
        sealed = cipher.encrypt(_dumps(to_plain(secrets)), _aad(payload.get("config")))
        body[SECRETS] = {"sealed": _bytes_tensor(sealed)}
    else:
        body[SECRETS] = {"plain": to_plain(secrets)}
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(body, tmp)
    tmp.replace(path)


def load_checkpoint(path: Path) -> tuple[dict[str, Any], Any]:
    """The payload and the decrypted secrets of a checkpoint written by :func:`save_checkpoint`.

    Raises:
        CheckpointError: the file holds anything but plain data (nothing in it is executed), is of
            another format, or its secrets do not decrypt under the user's key.
    """
    body = _loads(path.read_bytes(), str(path))
    if not isinstance(body, dict) or body.get("format") != FORMAT or not isinstance(body.get(SECRETS), dict):
        raise CheckpointError(f"{path}: not a {FORMAT} checkpoint; it cannot be resumed")
    stored = body.pop(SECRETS)
    body.pop("format")
    payload = from_plain(body, str(path))
    if "sealed" in stored:
        cipher = PayloadCipher(_user_key(path.parent, create=False), purpose=_PURPOSE)
        try:
            plain = cipher.decrypt(_tensor_bytes(stored["sealed"], str(path)), _aad(payload.get("config")))
        except DecryptionError:
            raise CheckpointError(
                f"{path}: the checkpoint's key material does not decrypt under {checkpoint_key_file()} "
                "(another user's key, or the file was altered)"
            ) from None
        secrets = from_plain(_loads(plain, f"{path} (secrets)"), f"{path} (secrets)")
    else:
        secrets = from_plain(stored.get("plain"), str(path))
    return payload, secrets
