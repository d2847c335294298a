"""Full-ranking top-K metrics (Precision, Recall, NDCG, HitRate) with LightGCN's definitions.

Every evaluated user is ranked against **all** items. Items the user already interacted with in
the matrices passed as ``exclude`` (normally ``train`` and, optionally, ``valid``) are masked: their
score is set to ``-inf`` before the top-K cut, so they can never be recommended.

Definitions, for a user ``u`` with non-empty test set ``T_u`` and top-K list ``L_u@K``
(positions ``r = 1..K``, ``rel_r = 1`` iff the item at position ``r`` is in ``T_u``)::

    hits@K      = |L_u@K ∩ T_u|          = Σ_{r=1..K} rel_r
    precision@K = hits@K / K
    recall@K    = hits@K / |T_u|
    hit@K       = 1[hits@K > 0]
    DCG@K       = Σ_{r=1..K} rel_r / log2(r + 1)
    IDCG@K      = Σ_{r=1..min(|T_u|, K)} 1 / log2(r + 1)
    ndcg@K      = DCG@K / IDCG@K

Reported numbers are plain (unweighted) means over the evaluated users, i.e. the users with at
least one test item; users without test items are skipped and not counted.

Ties: the top-K list is exactly the list returned by :func:`torch.topk` (``largest=True,
sorted=True``) on the masked score row. Equal scores are ordered however ``torch.topk`` orders them
(not guaranteed to be by item id; stable for a given build and device), so models that emit many
tied scores can get slightly build-dependent numbers.

A position whose score is ``-inf`` (a masked item, or an item the model itself scored ``-inf``)
never counts as a hit; this also covers ``K`` larger than the number of rankable items.
A ``NaN`` score raises :class:`ValueError` (``torch.topk`` would rank it first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "METRIC_NAMES",
    "RankingResult",
    "default_chunk_size",
    "evaluate_embeddings",
    "evaluate_scores",
]

#: Target size in bytes of one chunk's dense ``(users × items)`` score matrix.
DEFAULT_CHUNK_BYTES = 256 * 2**20

#: Metric name prefixes, in the order they appear in :attr:`RankingResult.metrics` for each K.
METRIC_NAMES = ("precision", "recall", "ndcg", "hit")

ScoreFn = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class RankingResult:
    """Result of a full-ranking evaluation.

    Attributes:
        metrics: mean metric over evaluated users, keyed ``"<name>@<K>"`` with ``name`` in
            ``precision``, ``recall``, ``ndcg``, ``hit`` (e.g. ``"ndcg@20"``), ordered by K as given
            and then by name. Values are ``nan`` when no user was evaluated.
        n_users_evaluated: number of users with at least one test item that were ranked.
        ks: the cut-offs, deduplicated, in the order given.
        users: when ``per_user=True``, the evaluated user ids (ascending, int64); else ``None``.
        per_user: when ``per_user=True``, one read-only float64 array per metric key, aligned with
            ``users`` (for paired significance tests); else ``None``.
    """

    metrics: dict[str, float]
    n_users_evaluated: int
    ks: tuple[int, ...]
    users: np.ndarray | None = None
    per_user: dict[str, np.ndarray] | None = None


def default_chunk_size(n_items: int, bytes_per_score: int = 4, budget: int = DEFAULT_CHUNK_BYTES) -> int:
    """Users per chunk so that one ``chunk × n_items`` score matrix fits in ``budget`` bytes.

    Returns ``max(1, budget // (n_items * bytes_per_score))``.
    """
    return max(1, budget // (max(1, n_items) * max(1, bytes_per_score)))


def evaluate_embeddings(
    user_emb: torch.Tensor,
    item_emb: torch.Tensor,
    test: sp.csr_matrix,
    exclude: Sequence[sp.csr_matrix | None] = (),
    ks: Sequence[int] = (20,),
    *,
    users: np.ndarray | Sequence[int] | None = None,
    chunk_size: int | None = None,
    per_user: bool = False,
) -> RankingResult:
    """Full-ranking top-K evaluation of a dot-product model.

    The score of user ``u`` for item ``i`` is ``s(u, i) = user_emb[u] · item_emb[i]``, computed per
    chunk of users as ``U_chunk @ Vᵀ`` on the device of ``user_emb``. Metric definitions are in the
    module docstring (precision@K = hits/K, recall@K = hits/|T_u|, hit@K = 1[hits > 0],
    ndcg@K = DCG@K / IDCG@K with binary relevance and IDCG over ``min(|T_u|, K)`` positions).

    Args:
        user_emb: ``(n_users, d)`` user embeddings.
        item_emb: ``(n_items, d)`` item embeddings, same dtype and device as ``user_emb``.
        test: binary ``(n_users, n_items)`` CSR of held-out items; every stored non-zero is relevant.
        exclude: CSR matrices of the same shape whose items are masked (score ``-inf``) for their
            user, typically ``(data.train, data.valid)``; ``None`` entries are ignored.
        ks: cut-offs; positive integers, evaluated from one ``topk`` with ``max(ks)``.
        users: optional subset of user ids to evaluate (duplicates ignored); default all users.
            Users in it without test items are still skipped.
        chunk_size: users scored at once; default keeps a chunk's score matrix ≈ ≤ 256 MiB
            (:func:`default_chunk_size`).
        per_user: also return per-user metric arrays.

    Returns:
        A :class:`RankingResult`.

    Raises:
        ValueError: on shape mismatches, invalid ``ks``/``chunk_size``/``users``, or ``NaN`` scores.
    """
    if user_emb.dim() != 2 or item_emb.dim() != 2:
        raise ValueError("user_emb and item_emb must be 2-D (rows, dim)")
    if user_emb.shape[1] != item_emb.shape[1]:
        raise ValueError(
            f"embedding dims differ: users {tuple(user_emb.shape)}, items {tuple(item_emb.shape)}"
        )
    n_users, n_items = int(user_emb.shape[0]), int(item_emb.shape[0])
    if chunk_size is None:
        chunk_size = default_chunk_size(n_items, user_emb.element_size())
    item_t = item_emb.detach().t()
    user_emb = user_emb.detach()
    buffer: list[torch.Tensor] = []

    def score_fn(idx: torch.Tensor) -> torch.Tensor:
        # Reuse one output buffer across chunks: avoids re-faulting a fresh 256 MiB block each time.
        b = int(idx.numel())
        if not buffer or buffer[0].shape[0] < b:
            buffer[:] = [torch.empty((b, n_items), dtype=user_emb.dtype, device=user_emb.device)]
        out = buffer[0][:b]
        torch.mm(user_emb[idx.to(user_emb.device)], item_t, out=out)
        return out

    return _evaluate(
        score_fn, n_users, n_items, test, exclude, ks, users=users, chunk_size=chunk_size, per_user=per_user
    )


def evaluate_scores(
    score_fn: ScoreFn,
    n_users: int,
    n_items: int,
    test: sp.csr_matrix,
    exclude: Sequence[sp.csr_matrix | None] = (),
    ks: Sequence[int] = (20,),
    *,
    users: np.ndarray | Sequence[int] | None = None,
    chunk_size: int | None = None,
    per_user: bool = False,
    copy_scores: bool = True,
) -> RankingResult:
    """Full-ranking top-K evaluation of an arbitrary scoring function.

    ``score_fn(user_idx)`` receives a 1-D ``torch.long`` CPU tensor of ``b`` user ids and must return
    a ``(b, n_items)`` floating tensor (any device) where larger means more relevant. It is called
    under :func:`torch.inference_mode`, once per chunk. Metric definitions are in the module
    docstring (precision@K = hits/K, recall@K = hits/|T_u|, hit@K = 1[hits > 0],
    ndcg@K = DCG@K / IDCG@K with binary relevance and IDCG over ``min(|T_u|, K)`` positions).

    Args:
        score_fn: maps user ids to their score rows over all items.
        n_users: number of users (rows of ``test``).
        n_items: number of items (columns of ``test``).
        test: binary ``(n_users, n_items)`` CSR of held-out items; every stored non-zero is relevant.
        exclude: CSR matrices of the same shape whose items are masked (score ``-inf``) for their
            user, typically ``(data.train, data.valid)``; ``None`` entries are ignored.
        ks: cut-offs; positive integers, evaluated from one ``topk`` with ``max(ks)``.
        users: optional subset of user ids to evaluate (duplicates ignored); default all users.
        chunk_size: users per ``score_fn`` call; default keeps a float32 chunk ≈ ≤ 256 MiB.
        per_user: also return per-user metric arrays.
        copy_scores: masking writes ``-inf`` into the score tensor; by default it writes into a
            copy. Pass ``False`` when ``score_fn`` returns a fresh tensor nobody else holds, to save
            the copy.

    Returns:
        A :class:`RankingResult`.

    Raises:
        ValueError: on shape mismatches, invalid ``ks``/``chunk_size``/``users``, or ``NaN`` scores.
    """
    if chunk_size is None:
        chunk_size = default_chunk_size(n_items)
    fn = score_fn
    if copy_scores:

        def fn(idx: torch.Tensor) -> torch.Tensor:
            return score_fn(idx).clone()

    return _evaluate(
        fn, n_users, n_items, test, exclude, ks, users=users, chunk_size=chunk_size, per_user=per_user
    )


# --------------------------------------------------------------------------------------------------
# internals


def _check_csr(m: sp.csr_matrix, shape: tuple[int, int], name: str) -> sp.csr_matrix:
    """Return ``m`` as CSR with the expected shape and no explicit zeros (copying only if needed)."""
    if not sp.issparse(m):
        raise ValueError(f"{name} must be a SciPy sparse matrix, got {type(m).__name__}")
    if m.shape != shape:
        raise ValueError(f"{name} has shape {m.shape}, expected {shape}")
    if m.format != "csr":
        m = sp.csr_matrix(m)
    if m.nnz and not np.all(m.data != 0):
        m = sp.csr_matrix(m, copy=True)
        m.eliminate_zeros()
    return m


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    out: list[int] = []
    for k in ks:
        if isinstance(k, bool) or int(k) != k or int(k) < 1:
            raise ValueError(f"every K must be a positive integer, got {k!r}")
        if int(k) not in out:
            out.append(int(k))
    if not out:
        raise ValueError("ks must not be empty")
    return tuple(out)


def _rows_coo(m: sp.csr_matrix, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Entries of the given CSR rows as (local row position, column) int64 arrays, vectorised.

    For ``rows = [r_0, ..., r_{b-1}]`` it returns every stored ``(j, m.indices[p])`` with
    ``p ∈ [indptr[r_j], indptr[r_j + 1])``, without a Python loop over rows.
    """
    indptr = m.indptr
    starts = indptr[rows].astype(np.int64)
    lens = indptr[rows + 1].astype(np.int64) - starts
    total = int(lens.sum())
    local = np.repeat(np.arange(len(rows), dtype=np.int64), lens)
    if total == 0:
        return local, np.empty(0, dtype=np.int64)
    # position p of each entry: starts[row] + offset within the row
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
    pos = np.repeat(starts, lens) + offsets
    return local, m.indices[pos].astype(np.int64)


def _evaluate(
    score_fn: ScoreFn,
    n_users: int,
    n_items: int,
    test: sp.csr_matrix,
    exclude: Sequence[sp.csr_matrix | None],
    ks: Sequence[int],
    *,
    users: np.ndarray | Sequence[int] | None,
    chunk_size: int,
    per_user: bool,
) -> RankingResult:
    n_users, n_items = int(n_users), int(n_items)
    if n_users < 0 or n_items < 1:
        raise ValueError(f"need n_users >= 0 and n_items >= 1, got {n_users}, {n_items}")
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    chunk_size = int(chunk_size)
    ks_t = _check_ks(ks)
    shape = (n_users, n_items)
    test = _check_csr(test, shape, "test")
    masks = [_check_csr(m, shape, f"exclude[{j}]") for j, m in enumerate(exclude) if m is not None]

    n_test = np.diff(test.indptr).astype(np.int64)
    if users is None:
        cand = np.arange(n_users, dtype=np.int64)
    else:
        cand = np.unique(np.asarray(users, dtype=np.int64).ravel())
        if cand.size and (cand[0] < 0 or cand[-1] >= n_users):
            raise ValueError(f"users must lie in [0, {n_users})")
    evaluated = cand[n_test[cand] > 0]

    k_max = max(ks_t)
    k_eff = min(k_max, n_items)  # topk cannot return more than n_items positions
    # discount[r-1] = 1 / log2(r + 1), r = 1..k_max;  idcg_table[m-1] = Σ_{r=1..m} discount[r-1]
    discount = 1.0 / np.log2(np.arange(2, k_max + 2, dtype=np.float64))
    idcg_table = np.cumsum(discount)

    parts: dict[str, list[np.ndarray]] = {f"{n}@{k}": [] for k in ks_t for n in METRIC_NAMES}
    with torch.inference_mode():
        for start in range(0, len(evaluated), chunk_size):
            rows = evaluated[start : start + chunk_size]
            b = len(rows)
            scores = score_fn(torch.from_numpy(rows))
            if tuple(scores.shape) != (b, n_items):
                raise ValueError(f"score_fn returned shape {tuple(scores.shape)}, expected {(b, n_items)}")
            if not scores.is_floating_point():
                raise ValueError(f"score_fn must return a floating tensor, got {scores.dtype}")
            for m in masks:
                r, c = _rows_coo(m, rows)
                if r.size:
                    dev = scores.device
                    scores[torch.from_numpy(r).to(dev), torch.from_numpy(c).to(dev)] = -torch.inf
            top_val, top_idx = torch.topk(scores, k_eff, dim=1, largest=True, sorted=True)
            if bool(torch.isnan(top_val).any()):
                raise ValueError("score_fn produced NaN scores")
            top_idx_np = top_idx.cpu().numpy().astype(np.int64)
            rankable = (top_val != -torch.inf).cpu().numpy()

            # test membership of each top item via sorted keys row_local * n_items + item
            tr, tc = _rows_coo(test, rows)
            keys = np.sort(tr * n_items + tc)
            query = np.arange(b, dtype=np.int64)[:, None] * n_items + top_idx_np
            pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
            rel = (keys[pos] == query) & rankable  # (b, k_eff)

            cum_hits = np.cumsum(rel, axis=1, dtype=np.int64)
            cum_dcg = np.cumsum(rel * discount[:k_eff], axis=1)
            nt = n_test[rows]
            for k in ks_t:
                j = min(k, k_eff) - 1
                hits = cum_hits[:, j].astype(np.float64)
                idcg = idcg_table[np.minimum(nt, k) - 1]
                parts[f"precision@{k}"].append(hits / k)
                parts[f"recall@{k}"].append(hits / nt)
                parts[f"ndcg@{k}"].append(cum_dcg[:, j] / idcg)
                parts[f"hit@{k}"].append((hits > 0).astype(np.float64))

    n_eval = len(evaluated)
    arrays = {key: (np.concatenate(v) if v else np.empty(0, dtype=np.float64)) for key, v in parts.items()}
    metrics = {key: (float(a.mean()) if n_eval else float("nan")) for key, a in arrays.items()}
    if not per_user:
        return RankingResult(metrics=metrics, n_users_evaluated=n_eval, ks=ks_t)
    for a in arrays.values():
        a.flags.writeable = False
    evaluated = evaluated.copy()
    evaluated.flags.writeable = False
    return RankingResult(metrics=metrics, n_users_evaluated=n_eval, ks=ks_t, users=evaluated, per_user=arrays)
