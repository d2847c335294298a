r"""Server preprocessing of LP-GCN: candidate convolution-clients and convolution-item assignment.

G. Wu, W. Pan, Q. Yang, Z. Ming, "Lossless and Privacy-Preserving Graph Convolution Network for
Federated Item Recommendation", https://arxiv.org/abs/2412.01141, Algorithm 3 (``specs/lpgcn.md``
§4, Algorithm 3).

The server sees the global bipartite graph of encrypted item-IDs: a binary client×item matrix
``holdings`` whose rows are :math:`\mathcal I_u \cup \mathcal I'_u` (real **and** virtual items,
indistinguishable to it). From it the server

1. picks the candidate convolution-clients :math:`\overline{\mathcal U}`, a small client group whose
   item sets cover every held item (minimum set cover, solved greedily:
   :func:`greedy_set_cover`);
2. gives every item :math:`i` one convolution-client :math:`\tilde u_i`, drawn uniformly from
   :math:`\overline{\mathcal U} \cap (\mathcal U_i \cup \mathcal U'_i)`
   (:func:`assign_convolution_items`);
3. calls :math:`\tilde{\mathcal U} = \{\tilde u_i\}` the convolution-clients
   (:math:`\tilde{\mathcal U} \subseteq \overline{\mathcal U}`).

:func:`plan_convolution` runs the three steps with a named random stream, and can enlarge
:math:`\overline{\mathcal U}` by a random share of the users, the procedure behind the paper's
Fig. 13 (§9.7).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fedgraphrec.seeding import numpy_rng

__all__ = [
    "ASSIGN_STREAM",
    "EXTRA_STREAM",
    "Assignment",
    "add_extra_candidates",
    "assign_convolution_items",
    "greedy_set_cover",
    "plan_convolution",
]

ASSIGN_STREAM: tuple[str, str] = ("lpgcn", "assign")
"""Stream names of the random convolution-item assignment (Algorithm 3, line 4)."""

EXTRA_STREAM: tuple[str, str] = ("lpgcn", "extra_candidates")
"""Stream names of the users added to the minimum cover (the Fig. 13 sweep)."""


def _binary_csr(holdings: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """A binary CSR copy of ``holdings``: every stored non-zero is one (client, item) holding."""
    if not sp.issparse(holdings):
        raise TypeError(f"holdings must be a scipy sparse matrix, got {type(holdings).__name__}")
    if holdings.ndim != 2:
        raise ValueError(f"holdings must be 2-D (clients × items), got shape {holdings.shape}")
    h = sp.csr_matrix(holdings, copy=True)
    h.sum_duplicates()
    h.eliminate_zeros()
    h.sort_indices()
    h.data = np.ones(h.nnz, dtype=np.int8)
    return h


def _segment_positions(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions ``indptr[r]:indptr[r+1]`` of every ``r`` in ``rows``, concatenated."""
    starts = indptr[rows]
    lengths = indptr[rows + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    return offsets + np.arange(total, dtype=np.int64)


def greedy_set_cover(holdings: sp.spmatrix | sp.sparray) -> np.ndarray:
    r"""Candidate convolution-clients :math:`\overline{\mathcal U}` by greedy minimum set cover.

    Algorithm 3, line 2: a client group whose item sets cover every held item, as small as
    possible. Exact minimum set cover is NP-hard; like the authors' code ([R], ``specs/lpgcn.md``
    §11.11) this runs the greedy heuristic with mandatory clients first:

    1. every client that is the **sole holder** of some item joins (no cover can avoid it);
    2. then, while some held item is uncovered, the client covering the most still-uncovered
       items joins (ties: lowest client id).

    Items nobody holds are ignored. Step 2 is a lazy greedy: a max-heap of (gain, client) whose
    entries may be stale; gains only shrink, so a popped entry whose gain is still current is the
    true maximum, and among equal gains the lowest id pops first. Gains are kept exact by
    subtracting, for every newly covered item, one from each of its holders (a CSC gather), so
    the whole cover costs :math:`O(\mathrm{nnz} + k \log n)` heap work plus one pass over the
    matrix.

    Args:
        holdings: binary clients×items matrix :math:`(n, m)` the server sees (real + virtual
            edges); any stored non-zero counts as a holding.

    Returns:
        The sorted client ids of :math:`\overline{\mathcal U}` (int64, shape ``(k,)``).

    Raises:
        TypeError: ``holdings`` is not a scipy sparse matrix.
        ValueError: ``holdings`` is not 2-D.

    Shapes:
        ``holdings``: :math:`(n, m)`; result: :math:`(k,)`, :math:`k \le n`.
    """
    h = _binary_csr(holdings)
    n = h.shape[0]
    csc = h.tocsc()
    csc.sort_indices()
    item_degree = np.diff(csc.indptr)

    selected = np.zeros(n, dtype=bool)
    sole_items = np.flatnonzero(item_degree == 1)
    selected[csc.indices[csc.indptr[sole_items]]] = True
    covered = item_degree == 0
    mandatory = np.flatnonzero(selected)
    covered[h.indices[_segment_positions(h.indptr, mandatory)]] = True

    gain = np.asarray(h @ (~covered).astype(np.int64)).ravel()
    gain[selected] = 0
    heap = [(-int(g), int(u)) for u, g in zip(np.flatnonzero(gain), gain[gain > 0], strict=True)]
    heapq.heapify(heap)
    h_indices, h_indptr = h.indices, h.indptr
    c_indices, c_indptr = csc.indices, csc.indptr
    while heap:
        neg_gain, u = heapq.heappop(heap)
        current = int(gain[u])
        if current == 0:
            continue
        if current != -neg_gain:
            heapq.heappush(heap, (-current, u))
            continue
        selected[u] = True
        row = h_indices[h_indptr[u] : h_indptr[u + 1]]
        new = row[~covered[row]]
        covered[new] = True
        np.subtract.at(gain, c_indices[_segment_positions(c_indptr, new)], 1)
    return np.flatnonzero(selected).astype(np.int64)


def assign_convolution_items(
    holdings: sp.spmatrix | sp.sparray, candidates: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    r"""Draw each item's convolution-client :math:`\tilde u_i` (Algorithm 3, lines 3–5).

    .. math::
        \tilde u_i \sim \mathrm{Uniform}\big(\overline{\mathcal U} \cap (\mathcal U_i \cup \mathcal U'_i)\big)

    independently per item; a virtual holder may be chosen. Vectorised: the eligible (item,
    candidate holder) edges are grouped by item in CSC order, and one ``rng.integers(0, c_i)`` per
    held item picks the offset inside item :math:`i`'s group of :math:`c_i` eligible holders.

    Args:
        holdings: binary clients×items matrix :math:`(n, m)` (real + virtual edges).
        candidates: client ids of :math:`\overline{\mathcal U}` (any order; duplicates ignored).
        rng: the generator to draw from (e.g. ``numpy_rng(seed, *ASSIGN_STREAM)``).

    Returns:
        ``conv_client_of_item`` (int64, shape ``(m,)``): :math:`\tilde u_i`, or ``-1`` for an item
        nobody holds.

    Raises:
        TypeError: ``holdings`` is not a scipy sparse matrix.
        ValueError: a candidate id is out of range, or some held item has no holder among the
            candidates (the candidates are not a cover; run :func:`greedy_set_cover` first).

    Shapes:
        ``holdings``: :math:`(n, m)`; ``candidates``: :math:`(k,)`; result: :math:`(m,)`.
    """
    h = _binary_csr(holdings)
    n, m = h.shape
    candidates = np.asarray(candidates, dtype=np.int64).ravel()
    if candidates.size and (candidates.min() < 0 or candidates.max() >= n):
        raise ValueError(
            f"candidate ids must lie in [0, {n}), got range [{candidates.min()}, {candidates.max()}]"
        )
    is_candidate = np.zeros(n, dtype=bool)
    is_candidate[candidates] = True

    csc = h.tocsc()
    csc.sort_indices()
    edge_item = np.repeat(np.arange(m, dtype=np.int64), np.diff(csc.indptr))
    eligible = is_candidate[csc.indices]
    holders = csc.indices[eligible].astype(np.int64)
    n_eligible = np.bincount(edge_item[eligible], minlength=m)
    held = np.diff(csc.indptr) > 0
    uncovered = np.flatnonzero(held & (n_eligible == 0))
    if uncovered.size:
        raise ValueError(
            f"{uncovered.size} held item(s) have no holder among the candidates (first: item "
            f"{uncovered[0]}); the candidate set must cover every held item"
        )
    conv_client_of_item = np.full(m, -1, dtype=np.int64)
    items = np.flatnonzero(held)
    start = np.cumsum(n_eligible) - n_eligible
    offset = rng.integers(0, n_eligible[items])
    conv_client_of_item[items] = holders[start[items] + offset]
    return conv_client_of_item


def add_extra_candidates(
    holdings: sp.spmatrix | sp.sparray, cover: np.ndarray, extra_fraction: float, rng: np.random.Generator
) -> np.ndarray:
    r"""Enlarge the candidate set by a random share of the users (the Fig. 13 procedure, §9.7).

    Adds :math:`\mathrm{round}(\rho\, n)` users drawn uniformly without replacement from the
    clients that hold at least one item and are not in ``cover`` (as the authors' code does [R]);
    when fewer are left, all of them are added (the candidates become every holding client).

    Args:
        holdings: binary clients×items matrix :math:`(n, m)`.
        cover: the minimum cover :math:`\overline{\mathcal U}_0`.
        extra_fraction: :math:`\rho \in [0, 1]`, the share of all :math:`n` users to add.
        rng: the generator to draw from (e.g. ``numpy_rng(seed, *EXTRA_STREAM)``).

    Returns:
        Sorted client ids of the enlarged candidate set (int64).

    Raises:
        ValueError: ``extra_fraction`` is outside :math:`[0, 1]`.
    """
    if not 0.0 <= extra_fraction <= 1.0:
        raise ValueError(f"extra_fraction must lie in [0, 1], got {extra_fraction}")
    h = _binary_csr(holdings)
    n = h.shape[0]
    cover = np.unique(np.asarray(cover, dtype=np.int64))
    n_extra = int(np.floor(extra_fraction * n + 0.5))
    if n_extra == 0:
        return cover
    pool = np.flatnonzero(np.diff(h.indptr) > 0)
    pool = pool[~np.isin(pool, cover)]
    extra = pool if n_extra >= pool.size else rng.choice(pool, size=n_extra, replace=False)
    return np.union1d(cover, extra).astype(np.int64)


def _read_only(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.int64)
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class Assignment:
    r"""Who convolves which item: the outcome of Algorithm 3.

    Attributes:
        conv_client_of_item: :math:`\tilde u_i` for every item (int64, shape ``(m,)``), ``-1`` for
            an item nobody holds.
        candidates: sorted candidate convolution-clients :math:`\overline{\mathcal U}` (size
            :math:`k`).
        convolution_clients: sorted convolution-clients :math:`\tilde{\mathcal U}`, the candidates
            that received at least one convolution-item (:math:`\tilde{\mathcal U} \subseteq
            \overline{\mathcal U}`).
        cover: sorted greedy minimum cover the candidates were grown from (equal to
            ``candidates`` when no extra users were added).
        n_clients: number of clients :math:`n = |\mathcal U|`.
    """

    conv_client_of_item: np.ndarray
    candidates: np.ndarray
    convolution_clients: np.ndarray
    cover: np.ndarray
    n_clients: int

    def __post_init__(self) -> None:
        for name in ("conv_client_of_item", "candidates", "convolution_clients", "cover"):
            object.__setattr__(self, name, _read_only(getattr(self, name)))

    @property
    def n_items(self) -> int:
        """Number of items :math:`m`."""
        return len(self.conv_client_of_item)

    @property
    def k(self) -> int:
        r"""Number of candidate convolution-clients :math:`k = |\overline{\mathcal U}|`."""
        return len(self.candidates)

    def convolution_items(self, client: int) -> np.ndarray:
        r""":math:`\tilde{\mathcal I}_{\tilde u}`: the items whose convolution-client is ``client``."""
        return np.flatnonzero(self.conv_client_of_item == client)


def plan_convolution(
    holdings: sp.spmatrix | sp.sparray,
    seed: int,
    extra_fraction: float = 0.0,
    *,
    cover: np.ndarray | None = None,
) -> Assignment:
    r"""Run Algorithm 3: greedy cover, optional extra candidates, random assignment.

    Args:
        holdings: binary clients×items matrix :math:`(n, m)` the server sees (real + virtual).
        seed: run seed; the assignment draws from ``numpy_rng(seed, "lpgcn", "assign")``, the
            extra candidates from ``numpy_rng(seed, "lpgcn", "extra_candidates")``.
        extra_fraction: :math:`\rho`, share of all users added to the minimum cover at random
            (Fig. 13; default: 0, the plain protocol).
        cover: a precomputed :func:`greedy_set_cover` of ``holdings`` to reuse (default: computed
            here).

    Returns:
        The :class:`Assignment`.

    Raises:
        TypeError: ``holdings`` is not a scipy sparse matrix.
        ValueError: ``extra_fraction`` outside :math:`[0, 1]`, or ``cover`` does not cover.
    """
    h = _binary_csr(holdings)
    base = greedy_set_cover(h) if cover is None else np.unique(np.asarray(cover, dtype=np.int64))
    candidates = add_extra_candidates(h, base, extra_fraction, numpy_rng(seed, *EXTRA_STREAM))
    conv_client_of_item = assign_convolution_items(h, candidates, numpy_rng(seed, *ASSIGN_STREAM))
    convolution_clients = np.unique(conv_client_of_item[conv_client_of_item >= 0])
    return Assignment(
        conv_client_of_item=conv_client_of_item,
        candidates=candidates,
        convolution_clients=convolution_clients,
        cover=base,
        n_clients=h.shape[0],
    )
