"""Additively homomorphic backends for the P4GCN sandwich ``L · [M] · R + Enc(E)``.

One interface, :class:`HEBackend`, serves the sandwich protocol. The key owner (the middle-matrix
owner) calls :meth:`HEBackend.encrypt` and :meth:`HEBackend.decrypt`; the side-matrix owner only calls
:meth:`HEBackend.sandwich` on ciphertexts it received, with its own plaintext sides and noise.

* :class:`PaillierBackend` — element-wise Paillier as in the paper (``phe`` key generation, ``gmpy2``
  arithmetic; optional extra ``[paillier]``). Reals are fixed-point integers: the middle matrix at
  scale ``2**frac_bits``, each side at ``2**side_bits``; negatives live in the upper half of ``Z_n``.
  Each ciphertext is ``2 * key_bits / 8`` bytes.
* :class:`CKKSBackend` — TenSEAL CKKS with rows packed into slots (optional extra ``[he]``): blocks of
  ``slots // d`` rows share one ciphertext per output column, so the right-side product costs ``d``
  encrypted matrix–vector products per block instead of one vector–matrix product per row.
* :class:`~fedgraphrec.crypto.he.packed.PackedCKKSBackend` (``ckks-packed``) — SEAL CKKS with
  interleaved replicated rows and a baby-step/giant-step diagonal product: one ciphertext per block of
  ``slots // d`` result rows, hundreds of times faster than per-element Paillier (the backend to use
  for real-HE training).
* :class:`PlainBackend` — no encryption: the identical arithmetic in float64, with byte counts as if
  every element were a Paillier ciphertext, for experiments too large for real HE.

The side-matrix owner's result is re-randomised by adding an encryption of the DP noise, exactly as
in Algorithm 1 of the paper.

Backends are registered by name (:data:`BACKENDS`) and imported when :func:`make_backend` asks for
one, so the optional extras are only needed for the backends a run uses, and no backend module imports
this package (they build on :mod:`.base`): no import cycle.
"""

from __future__ import annotations

import importlib
from typing import Any

from fedgraphrec.crypto.he.base import HEBackend

__all__ = ["BACKENDS", "make_backend"]

_REGISTRY = {
    "plain": ("fedgraphrec.crypto.he.plain", "PlainBackend"),
    "paillier": ("fedgraphrec.crypto.he.paillier", "PaillierBackend"),
    "ckks": ("fedgraphrec.crypto.he.ckks", "CKKSBackend"),
    "ckks-packed": ("fedgraphrec.crypto.he.packed", "PackedCKKSBackend"),
}
BACKENDS = tuple(_REGISTRY)
"""Backend names :func:`make_backend` accepts."""


def make_backend(name: str, **kwargs: Any) -> HEBackend:
    """Build a backend by name: ``plain``, ``paillier``, ``ckks`` or ``ckks-packed``.

    Raises:
        ValueError: for an unknown name (the message lists the valid ones).
    """
    if name not in _REGISTRY:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {name!r}")
    module, cls = _REGISTRY[name]
    backend: HEBackend = getattr(importlib.import_module(module), cls)(**kwargs)
    return backend
