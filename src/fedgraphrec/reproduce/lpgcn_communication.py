r"""LP-GCN's neighbour-user exchange: communication cost, Eqs. 30–32 (Fig. 13 sweep: :mod:`.lpgcn_fig13`).

G. Wu, W. Pan, Q. Yang, Z. Ming, "Lossless and Privacy-Preserving Graph Convolution Network for
Federated Item Recommendation", https://arxiv.org/abs/2412.01141, §5.2 and §6.3.5
(``specs/lpgcn.md`` §8 and §9.7).

In every forward layer (Algorithm 4, line 6) a convolution-client :math:`\tilde u` receives the
embeddings of its convolution-item based neighbouring users

.. math::
    \mathcal N_{\tilde u} = \bigcup_{\tilde i \in \tilde{\mathcal I}_{\tilde u}}
        \big(\mathcal U_{\tilde i} \setminus \{\tilde u\}\big),

where :math:`\mathcal U_{\tilde i}` are the **real** (training) holders of :math:`\tilde i`:
after the verification sub-protocol the server forwards only real neighbours. The paper's
per-client cost and neighbour-embedding utilisation are

.. math::
    C = \frac{d\,L\,B \sum_{\tilde u \in \tilde{\mathcal U}} |\mathcal N_{\tilde u}|}{|\mathcal U|}
    \quad (30), \qquad
    r_{\tilde u} = \frac{\sum_{\tilde i \in \tilde{\mathcal I}_{\tilde u}}
        |\mathcal U_{\tilde i} \setminus \{\tilde u\}| - |\mathcal N_{\tilde u}|}{|\mathcal N_{\tilde u}|}
    \quad (31), \qquad
    R = \frac{1}{|\tilde{\mathcal U}|} \sum_{\tilde u \in \tilde{\mathcal U}} r_{\tilde u} \quad (32).

The numerator of :math:`r_{\tilde u}` counts neighbour embeddings that serve more than one
convolution-item (reuse). The authors' code pools instead,
:math:`R_\Sigma = \sum_{\tilde u}(\text{slots}_{\tilde u} - |\mathcal N_{\tilde u}|) / \sum_{\tilde u}
|\mathcal N_{\tilde u}|` ([R]); both are provided, Eq. 32 is primary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import scipy.sparse as sp

from fedgraphrec.protocols.lpgcn.cover import Assignment, _read_only

__all__ = [
    "BYTES_PER_FLOAT32",
    "CommunicationReport",
    "NeighbourCounts",
    "communication_report",
    "neighbour_sets",
    "per_client_cost",
    "reuse_ratios",
    "utilisation",
    "utilisation_of_sums",
]

BYTES_PER_FLOAT32 = 4
"""``B`` of Eq. 30: bytes per transmitted embedding entry (float32)."""


@dataclass(frozen=True)
class NeighbourCounts:
    r"""Neighbour-user counts of every convolution-client, aligned by position.

    Attributes:
        convolution_clients: sorted :math:`\tilde{\mathcal U}` (clients with ≥ 1 convolution-item).
        n_neighbours: :math:`|\mathcal N_{\tilde u}|`, distinct real neighbouring users.
        n_slots: :math:`\sum_{\tilde i \in \tilde{\mathcal I}_{\tilde u}} |\mathcal U_{\tilde i}
            \setminus \{\tilde u\}|`, neighbour embeddings needed counted once per
            convolution-item (≥ ``n_neighbours``).
        n_conv_items: :math:`|\tilde{\mathcal I}_{\tilde u}|`.
        n_clients: :math:`|\mathcal U| = n`, the denominator of Eq. 30.
    """

    convolution_clients: np.ndarray
    n_neighbours: np.ndarray
    n_slots: np.ndarray
    n_conv_items: np.ndarray
    n_clients: int

    def __post_init__(self) -> None:
        for name in ("convolution_clients", "n_neighbours", "n_slots", "n_conv_items"):
            object.__setattr__(self, name, _read_only(getattr(self, name)))
        if not (
            len(self.convolution_clients)
            == len(self.n_neighbours)
            == len(self.n_slots)
            == len(self.n_conv_items)
        ):
            raise ValueError("NeighbourCounts arrays must have equal length")

    @property
    def total_neighbours(self) -> int:
        r""":math:`\sum_{\tilde u} |\mathcal N_{\tilde u}|`, neighbour embeddings sent per layer."""
        return int(self.n_neighbours.sum())


def neighbour_sets(real: sp.spmatrix | sp.sparray, conv_client_of_item: np.ndarray) -> NeighbourCounts:
    r"""Count :math:`|\mathcal N_{\tilde u}|` and the per-item neighbour slots of every convolution-client.

    Vectorised: every real edge :math:`(v, i)` becomes the pair :math:`(\tilde u_i, v)`; self pairs
    :math:`v = \tilde u_i` are dropped; the slot count of :math:`\tilde u` is the number of its
    pairs, and :math:`|\mathcal N_{\tilde u}|` the number of its distinct pairs (found by sorting
    the int64 keys ``ũ·n + v``).

    Args:
        real: binary clients×items matrix :math:`(n, m)` of **real** training interactions
            (:math:`\mathcal U_i` are its columns). Virtual items never enter Eqs. 30–31.
        conv_client_of_item: :math:`\tilde u_i` per item (shape ``(m,)``), ``-1`` for items
            nobody holds (:attr:`Assignment.conv_client_of_item`).

    Returns:
        :class:`NeighbourCounts` for the convolution-clients :math:`\tilde{\mathcal U}` (the
        distinct non-negative entries of ``conv_client_of_item``).

    Raises:
        TypeError: ``real`` is not a scipy sparse matrix.
        ValueError: shapes disagree, a convolution-client id is out of range, or an item with real
            holders has no convolution-client.

    Shapes:
        ``real``: :math:`(n, m)`; ``conv_client_of_item``: :math:`(m,)`; result arrays:
        :math:`(|\tilde{\mathcal U}|,)`.
    """
    if not sp.issparse(real):
        raise TypeError(f"real must be a scipy sparse matrix, got {type(real).__name__}")
    r = sp.csc_matrix(real, copy=True)
    r.sum_duplicates()
    r.eliminate_zeros()
    n, m = r.shape
    conv = np.asarray(conv_client_of_item, dtype=np.int64).ravel()
    if conv.shape != (m,):
        raise ValueError(
            f"conv_client_of_item has shape {conv.shape}, expected ({m},) to match real {r.shape}"
        )
    if conv.size and conv.max() >= n:
        raise ValueError(f"convolution-client ids must be < n = {n}, got {conv.max()}")
    edge_item = np.repeat(np.arange(m, dtype=np.int64), np.diff(r.indptr))
    owner = conv[edge_item]
    if (owner < 0).any():
        orphan = edge_item[owner < 0][0]
        raise ValueError(f"item {orphan} has real holders but no convolution-client")
    neighbour = r.indices.astype(np.int64)
    keep = neighbour != owner
    owner, neighbour = owner[keep], neighbour[keep]

    conv_items_per_client = np.bincount(conv[conv >= 0], minlength=n)
    clients = np.flatnonzero(conv_items_per_client)
    slots = np.bincount(owner, minlength=n)
    key = np.sort(owner * n + neighbour)
    first = np.ones(key.size, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    distinct = np.bincount(key[first] // n, minlength=n)
    return NeighbourCounts(
        convolution_clients=clients,
        n_neighbours=distinct[clients],
        n_slots=slots[clients],
        n_conv_items=conv_items_per_client[clients],
        n_clients=n,
    )


def per_client_cost(neighbours: NeighbourCounts, *, d: int, L: int, B: int = BYTES_PER_FLOAT32) -> float:
    r"""Eq. 30: average bytes of neighbour-user embeddings per client and iteration (forward).

    .. math::
        C = \frac{d\,L\,B \sum_{\tilde u \in \tilde{\mathcal U}} |\mathcal N_{\tilde u}|}{|\mathcal U|}

    The backward pass (Eq. 21 gradients) costs the same again; the paper reports :math:`C`.

    Args:
        neighbours: :func:`neighbour_sets` output.
        d: embedding dimension (the paper: 64).
        L: number of layers (the paper: Gowalla 4, Yelp2018 3, Amazon-Book 4).
        B: bytes per entry (default: 4, float32).

    Returns:
        :math:`C` in bytes.

    Raises:
        ValueError: ``d``, ``L`` or ``B`` is not positive.
    """
    if d <= 0 or L <= 0 or B <= 0:
        raise ValueError(f"d, L and B must be positive, got d={d}, L={L}, B={B}")
    return d * L * B * neighbours.total_neighbours / neighbours.n_clients


def reuse_ratios(neighbours: NeighbourCounts) -> np.ndarray:
    r"""Eq. 31, the reuse ratio :math:`r_{\tilde u}` of every convolution-client.

    .. math::
        r_{\tilde u} = \frac{\text{slots}_{\tilde u} - |\mathcal N_{\tilde u}|}{|\mathcal N_{\tilde u}|}

    A convolution-client with :math:`|\mathcal N_{\tilde u}| = 0` (its convolution-items have no
    other real holder, e.g. items it alone interacted with) receives nothing and reuses nothing;
    Eq. 31 is 0/0 there and is taken as :math:`r_{\tilde u} = 0` ([G]; the paper does not say).

    Returns:
        float64 array aligned with ``neighbours.convolution_clients``.
    """
    n_nb = neighbours.n_neighbours.astype(np.float64)
    overlap = (neighbours.n_slots - neighbours.n_neighbours).astype(np.float64)
    return np.divide(overlap, n_nb, out=np.zeros_like(n_nb), where=n_nb > 0)


def utilisation(neighbours: NeighbourCounts) -> float:
    r"""Eq. 32: :math:`R = \frac{1}{|\tilde{\mathcal U}|}\sum_{\tilde u} r_{\tilde u}`, the mean Eq. 31 ratio.

    Convolution-clients without neighbours count with :math:`r_{\tilde u} = 0` (see
    :func:`reuse_ratios`). Returns 0 when there is no convolution-client.
    """
    r = reuse_ratios(neighbours)
    return float(r.mean()) if r.size else 0.0


def utilisation_of_sums(neighbours: NeighbourCounts) -> float:
    r"""Pooled utilisation as computed by the authors' code ([R]).

    .. math::
        R_\Sigma = \frac{\sum_{\tilde u}\big(\text{slots}_{\tilde u} - |\mathcal N_{\tilde u}|\big)}
            {\sum_{\tilde u} |\mathcal N_{\tilde u}|}

    Returns 0 when no neighbour embedding is sent at all.
    """
    total = neighbours.total_neighbours
    return float((neighbours.n_slots.sum() - total) / total) if total else 0.0


@dataclass(frozen=True)
class CommunicationReport:
    r"""Eqs. 30–32 for one convolution plan.

    Attributes:
        n_clients: :math:`n = |\mathcal U|`.
        n_items: :math:`m`.
        k: number of candidate convolution-clients :math:`|\overline{\mathcal U}|`.
        k_fraction: :math:`k / n`.
        n_convolution_clients: :math:`|\tilde{\mathcal U}|`, candidates with ≥ 1 convolution-item.
        convolution_fraction: :math:`|\tilde{\mathcal U}| / n` (the x axis of Fig. 13).
        total_neighbours: :math:`\sum_{\tilde u} |\mathcal N_{\tilde u}|`.
        mean_neighbours: :math:`\sum_{\tilde u} |\mathcal N_{\tilde u}| / |\tilde{\mathcal U}|`.
        items_per_candidate: :math:`m / k` ([R]'s "average computation").
        d: embedding dimension used for :math:`C`.
        L: number of layers used for :math:`C`.
        cost_bytes: :math:`C` of Eq. 30 in bytes.
        R: Eq. 32 (mean of Eq. 31 ratios).
        R_pooled: ratio-of-sums utilisation ([R]).
    """

    n_clients: int
    n_items: int
    k: int
    k_fraction: float
    n_convolution_clients: int
    convolution_fraction: float
    total_neighbours: int
    mean_neighbours: float
    items_per_candidate: float
    d: int
    L: int
    cost_bytes: float
    R: float
    R_pooled: float

    @property
    def cost_kib(self) -> float:
        """:math:`C` in KiB (1 KiB = 1024 bytes)."""
        return self.cost_bytes / 1024.0

    @property
    def cost_kb(self) -> float:
        """:math:`C` in kB (1 kB = 1000 bytes)."""
        return self.cost_bytes / 1000.0

    def as_dict(self) -> dict[str, float | int]:
        """Fields plus ``cost_kib``/``cost_kb``, e.g. for a CSV row."""
        return {**asdict(self), "cost_kib": self.cost_kib, "cost_kb": self.cost_kb}


def communication_report(
    real: sp.spmatrix | sp.sparray,
    assignment: Assignment,
    *,
    d: int,
    L: int,
    B: int = BYTES_PER_FLOAT32,
) -> CommunicationReport:
    r"""Evaluate Eqs. 30–32 for ``assignment`` on the real training graph ``real``.

    Args:
        real: binary clients×items matrix :math:`(n, m)` of real training interactions.
        assignment: the :class:`~fedgraphrec.protocols.lpgcn.cover.Assignment` (computed on the
            real + virtual holdings).
        d: embedding dimension.
        L: number of layers.
        B: bytes per entry (default: 4).

    Returns:
        The :class:`CommunicationReport`.

    Raises:
        ValueError: shapes disagree (see :func:`neighbour_sets`) or ``d``/``L``/``B`` ≤ 0.
    """
    nb = neighbour_sets(real, assignment.conv_client_of_item)
    if nb.n_clients != assignment.n_clients:
        raise ValueError(f"real has {nb.n_clients} clients, the assignment {assignment.n_clients}")
    n, k, n_conv = nb.n_clients, assignment.k, len(nb.convolution_clients)
    return CommunicationReport(
        n_clients=n,
        n_items=assignment.n_items,
        k=k,
        k_fraction=k / n,
        n_convolution_clients=n_conv,
        convolution_fraction=n_conv / n,
        total_neighbours=nb.total_neighbours,
        mean_neighbours=nb.total_neighbours / n_conv if n_conv else 0.0,
        items_per_candidate=assignment.n_items / k if k else 0.0,
        d=d,
        L=L,
        cost_bytes=per_client_cost(nb, d=d, L=L, B=B),
        R=utilisation(nb),
        R_pooled=utilisation_of_sums(nb),
    )
