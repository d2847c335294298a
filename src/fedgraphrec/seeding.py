"""Named random streams derived from one run seed, and which draws may use them.

Two kinds of randomness (DESIGN.md, "Randomness and reproducibility"):

* *public* streams — splits, minibatch order, evaluation sampling, the rounds' users, the set-up
  choices the server makes in the open — are named children of the run seed (:func:`numpy_rng`,
  :func:`torch_generator`), so a config and a seed give the same metrics on every engine;
* *hiding* draws — initial tables a party could match, virtual items, cover gradients, negatives,
  pseudo items, DP/LDP noise, group sampling — hide something from a party that may hold the seed
  (it sits in every run folder's ``config.toml``). :func:`secure_draws` says whether a run draws
  them from the OS CSPRNG (the default under ``--crypto real``) or from the seed (``reproducible``
  research runs, the default under ``--crypto accounted``); :func:`hiding_rng` gives the generator.

Secrets (keys, nonces, shares, masks, pairwise seeds) never come from here: they come from the OS
CSPRNG or a PRG keyed by an agreed secret (SECURITY.md). Streams are independent of each other and of
the order in which they are created, so a federated protocol can replay the centralized oracle's
triples exactly, and a resumed run draws what an uninterrupted run would have.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np
import torch

__all__ = [
    "child_seed",
    "hiding_rng",
    "numpy_rng",
    "secure_draws",
    "secure_rng",
    "seeded_generator",
    "torch_generator",
]


def _key(part: str | int) -> int:
    if isinstance(part, int):
        if part < 0:
            raise ValueError(f"stream index must be non-negative, got {part}")
        return part
    return int.from_bytes(hashlib.sha256(part.encode()).digest()[:4], "little")


def child_seed(seed: int, *names: str | int) -> np.random.SeedSequence:
    """The :class:`numpy.random.SeedSequence` of stream ``names`` under run seed ``seed``."""
    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    return np.random.SeedSequence(entropy=seed, spawn_key=tuple(_key(n) for n in names))


def numpy_rng(seed: int, *names: str | int) -> np.random.Generator:
    """A PCG64 generator for stream ``names`` (e.g. ``numpy_rng(seed, "sampler", epoch)``)."""
    return np.random.Generator(np.random.PCG64(child_seed(seed, *names)))


def torch_generator(seed: int, *names: str | int) -> torch.Generator:
    """A CPU :class:`torch.Generator` seeded from stream ``names``."""
    state = child_seed(seed, *names).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) | (int(state[1]) << 32) & 0x7FFF_FFFF_FFFF_FFFF)


def seeded_generator(seed: int) -> torch.Generator:
    """A CPU :class:`torch.Generator` seeded with ``seed`` itself (for callers that pass a drawn seed)."""
    return torch.Generator().manual_seed(seed)


def secure_draws(config: Any, override: str | None = None) -> bool:
    """Whether a run's hiding draws come from the OS CSPRNG (``True``) or from the run seed.

    The rule: an explicit per-feature ``override`` on ``config`` (``secure_init``,
    ``secure_virtual_items``, ``secure_noise``; ``None`` when unset) wins; otherwise the run-level
    ``reproducible`` switch decides (seeded draws when true); unset, it is true under
    ``crypto = "accounted"`` and false under ``crypto = "real"``. So ``--crypto real`` hides by default
    and bit-for-bit research runs take one explicit ``--set reproducible=true``. ``config`` may be any
    object (a run configuration or a protocol's settings): missing attributes count as unset.
    """
    if override is not None:
        value = getattr(config, override, None)
        if value is not None:
            return bool(value)
    reproducible = getattr(config, "reproducible", None)
    if reproducible is None:
        return getattr(config, "crypto", "accounted") == "real"
    return not reproducible


def secure_rng() -> np.random.Generator:
    """A numpy generator keyed by 256 fresh bits of :func:`os.urandom` (one per hiding stream).

    For hiding draws that need numpy's samplers (``choice``, ``integers``, ``standard_normal``). Its
    expansion is PCG64DXSM, a statistical generator, so callers key a fresh one per small draw (one
    client's negatives or pseudo items in one round, one step's group sample): what a party observes of
    one stream is a few hundred bits of filtered, unordered output, far from the long run of raw
    consecutive words that PCG state recovery needs. Large hiding tables (initial embeddings) come
    from the ChaCha20 keystream of :class:`~fedgraphrec.privacy.noise_source.SecureNoise` instead.
    """
    entropy = int.from_bytes(os.urandom(32), "little")
    return np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence(entropy)))


def hiding_rng(secure: bool, seed: int, *names: str | int) -> np.random.Generator:
    """The generator of a hiding draw: :func:`secure_rng` when ``secure``, else stream ``names``."""
    return secure_rng() if secure else numpy_rng(seed, *names)
