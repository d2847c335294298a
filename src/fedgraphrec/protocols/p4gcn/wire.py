"""HE matrices as message parts: what crosses between the organisations, and how each side opens it.

A ciphertext matrix travels as one ``blobs`` part with protection ``homomorphic``: in process and
in ``accounted`` crypto mode the :class:`~fedgraphrec.crypto.he.EncMatrix` itself (no copy), and
across a process boundary or in ``real`` mode the backend's own serialisation
(:meth:`~fedgraphrec.crypto.he.HEBackend.to_bytes`: TenSEAL/SEAL ``serialize``, Paillier ciphertext
integers, the ``plain`` simulation's float64 buffer), which the receiver turns back into a matrix
under the context it holds (:meth:`~fedgraphrec.crypto.he.HEBackend.from_bytes`). Either way the
ledger books the matrix's wire size once (:meth:`~fedgraphrec.crypto.he.HEBackend.nbytes`; the
``plain`` backend counts Paillier-sized ciphertexts), so both modes and both engines agree.

The part's ``meta`` names the matrix's shape; the receiver checks it against the shape its own state
says (the batch it asked for, the embedding width) before using anything.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.he import make_backend
from fedgraphrec.crypto.he.base import EncMatrix, HEBackend
from fedgraphrec.crypto.he.ckks import CKKSBackend
from fedgraphrec.crypto.he.plain import PlainBackend
from fedgraphrec.runtime.part import BOOKED_ONCE, Part
from fedgraphrec.runtime.sealing import SERVER

__all__ = ["he_from_context", "he_part", "ids_part", "make_he", "open_he", "open_ids", "relay"]


def make_he(name: str, dim: int) -> HEBackend:
    """The recommender's HE backend (its key pair): ``plain`` counts Paillier-2048 bytes."""
    if name == "plain":
        return PlainBackend(2048)
    if name == "ckks-packed":
        return make_backend(name, dim=dim)
    return make_backend(name)


def he_from_context(name: str, data: bytes) -> HEBackend:
    """A backend from its serialised context (``public_bytes`` or ``secret_bytes``).

    So far ``plain`` and ``ckks`` (TenSEAL) can be rebuilt in another process.

    Raises:
        ValueError: another backend (its keys do not cross processes yet).
    """
    if name == "plain":
        return PlainBackend.from_context(data)
    if name == "ckks":
        return CKKSBackend.from_context(data)
    raise ValueError(f"backend {name!r}: its keys cannot cross processes yet (plain and ckks can)")


def he_part(
    backend: HEBackend, enc: EncMatrix, phase: str, kind: str, sender: str, receiver: str, *, serialise: bool
) -> Part:
    """``enc`` as the part ``sender`` sends to ``receiver`` (through the coordinator)."""
    meta = {"rows": int(enc.shape[0]), "cols": int(enc.shape[1]), "scale_bits": int(enc.scale_bits)}
    if not serialise:
        value: list[object] = [enc]
        sizes = [backend.nbytes(enc)]
    else:
        blobs = backend.to_bytes(enc)
        value = list(blobs)
        sizes = [backend.nbytes(enc)] if backend.name == "plain" else [len(b) for b in blobs]
    return Part(
        phase, kind, sender, receiver, value, shape="blobs", protection="homomorphic", meta=meta,
        _sizes=np.asarray(sizes, dtype=np.int64),
    )  # fmt: skip


def open_he(backend: HEBackend, part: Part, rows: int, cols: int, where: str) -> EncMatrix:
    """The matrix a delivered part carries, checked to be ``rows × cols``.

    Raises:
        IntegrityError: naming ``where`` when the shape or the serialisation is not the expected one.
    """
    meta = part.meta
    try:
        shape = (int(meta["rows"]), int(meta["cols"]))
        scale_bits = int(meta["scale_bits"])
    except (KeyError, TypeError, ValueError) as exc:
        raise IntegrityError(f"{where}: the ciphertext matrix does not state its shape") from exc
    if shape != (rows, cols):
        raise IntegrityError(f"{where}: a {shape} ciphertext matrix; this party expects {(rows, cols)}")
    value = list(part.value or [])
    if len(value) == 1 and isinstance(value[0], EncMatrix):
        enc = value[0]
        if enc.shape != shape:
            raise IntegrityError(f"{where}: a {enc.shape} ciphertext matrix; this party expects {shape}")
        return enc
    if not all(isinstance(b, bytes | bytearray) for b in value):
        raise IntegrityError(f"{where}: the ciphertexts are neither a matrix nor serialised bytes")
    try:
        return backend.from_bytes([bytes(b) for b in value], shape, scale_bits)
    except ValueError as exc:
        raise IntegrityError(f"{where}: {exc}") from exc


def ids_part(users: np.ndarray, sender: str, receiver: str, phase: str) -> Part:
    """Message 1: the plaintext ids of the batch users (public, spec §1.4), 8 bytes each on the ledger."""
    ids = np.asarray(users, dtype=np.int64).copy()
    return Part(
        phase, "batch_user_ids", sender, receiver, ids, shape="broadcast",
        _sizes=np.asarray([8 * len(ids)], dtype=np.int64),
    )  # fmt: skip


def open_ids(part: Part, n_users: int, most: int, where: str) -> np.ndarray:
    """The batch user ids of a delivered message 1: sorted, distinct, in ``[0, n_users)``, at most ``most``.

    Raises:
        IntegrityError: naming ``where`` and what is wrong.
    """
    ids = np.asarray(part.value)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise IntegrityError(f"{where}: batch user ids must be a 1-d integer array")
    ids = ids.astype(np.int64)
    if len(ids) == 0 or len(ids) > most:
        raise IntegrityError(f"{where}: {len(ids)} batch users; a batch has 1 to {most}")
    if ids[0] < 0 or ids[-1] >= n_users or (len(ids) > 1 and (np.diff(ids) <= 0).any()):
        raise IntegrityError(f"{where}: batch user ids must be distinct, sorted and in [0, {n_users})")
    return ids


def relay(part: Part) -> Part:
    """The coordinator's hop of ``part``: sent by the server, first sent by its organisation.

    The ledger booked the message on its first hop (organisation → coordinator, labelled with the
    receiving organisation), so this hop is marked :data:`~fedgraphrec.runtime.part.BOOKED_ONCE`
    and not booked again.
    """
    return replace(
        part, sender_role=SERVER, from_role=part.sender_role, meta={**part.meta, BOOKED_ONCE: True}
    )
