"""Cryptographic building blocks, as thin wrappers over the pyca ``cryptography`` package.

* :class:`ClientKeyPair` / :class:`PublicKey` — per-client X25519 key pairs.
* :class:`SharedKey` — the shared symmetric key ``S``, with purpose-bound sub-keys.
* :func:`wrap_key` / :func:`unwrap_key` — deliver ``S`` to a client (``PB_u(S)``).
* :func:`seal` / :func:`open_sealed` — one-shot public-key encryption (verification answers).
* :class:`ItemTokenizer` — deterministic item-ID tokens under ``S``.
* :class:`PayloadCipher` — randomized AEAD of payloads under ``S``; :func:`ciphertext_size` and
  :func:`sealed_size` give exact output sizes for byte accounting.
* :func:`secure_sum` / :class:`SecAggClient` / :class:`SecAggServer` — secure aggregation with dropout
  recovery (Bonawitz et al.), over Shamir sharing (:mod:`~fedgraphrec.crypto.shamir`).
* :class:`IntegrityError` — a received message was tampered, replayed, re-routed or is missing;
  :class:`DecryptionError` (an :class:`IntegrityError`) — failed authentication.
* :class:`SecAggAbortError` (a :class:`CryptoError`) — too few clients left for secure aggregation.
"""

from fedgraphrec.crypto.aead import PayloadCipher, ciphertext_size
from fedgraphrec.crypto.errors import CryptoError, DecryptionError, IntegrityError
from fedgraphrec.crypto.keys import (
    ClientKeyPair,
    PublicKey,
    SharedKey,
    open_sealed,
    seal,
    sealed_size,
    unwrap_key,
    wrap_key,
)
from fedgraphrec.crypto.secagg import SecAggAbortError, SecAggClient, SecAggServer, secure_sum
from fedgraphrec.crypto.sharing import FixedPoint, mask_from_seed, pair_clients, reconstruct, split
from fedgraphrec.crypto.tokens import ItemTokenizer

__all__ = [
    "ClientKeyPair",
    "CryptoError",
    "DecryptionError",
    "FixedPoint",
    "IntegrityError",
    "ItemTokenizer",
    "PayloadCipher",
    "PublicKey",
    "SecAggAbortError",
    "SecAggClient",
    "SecAggServer",
    "SharedKey",
    "ciphertext_size",
    "mask_from_seed",
    "open_sealed",
    "pair_clients",
    "reconstruct",
    "seal",
    "sealed_size",
    "secure_sum",
    "split",
    "unwrap_key",
    "wrap_key",
]
