"""Named random streams derived from one run seed.

Every reproducible random draw in fedgraphrec (initial tables, splits, BPR triples, seeded DP noise of
research runs, virtual items by default) comes from a stream named by a path such as
``("sampler", epoch)``; no global RNG state is set anywhere. Secrets (keys, nonces, shares, masks,
pairwise seeds, noise claimed as a guarantee) never come from here: they come from the OS CSPRNG or a
PRG keyed by an agreed secret (SECURITY.md). Streams are independent
of each other and of the order in which they are created, so a federated protocol can replay the
centralized oracle's triples exactly, and a resumed run draws what an uninterrupted run would have.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch

__all__ = ["child_seed", "numpy_rng", "seeded_generator", "torch_generator"]


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
