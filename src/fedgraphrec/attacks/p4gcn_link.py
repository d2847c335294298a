r"""P4GCN: the recommender ``P1`` infers the social party's links from the sandwiches it decrypts.

``P1`` holds the Paillier key, so every sandwich ``P2`` returns is plaintext to it (spec
``p4gcn.md`` §3.4, §4.5):

.. math::

    Y_{\mathcal B} = (\mathcal B\tilde L)\,X\,W_1 + E^{fwd}, \qquad
    \Delta_{\mathcal B} = (\mathcal B\tilde L\mathcal B^\top)\,G\,W_1^\top + E^{bwd},

and the final all-user release :math:`Y = \tilde L X W_1 + E^{eval}`. ``P1`` also knows every middle
matrix, because it sent them: ``[X]`` at set-up and the re-synced rows ``[X_B]`` (so it can replay the
exact :math:`X` ``P2`` multiplied at each iteration), and the gradients ``[G]``. It does **not** know
:math:`\tilde L`, :math:`W_1` or the noise.

The attack, per source (``forward``: training forwards and the evaluation release; ``backward``:
the backward sandwiches):

1. **Recover** :math:`W_1` **up to scale.** Row i of a release is
   :math:`\tilde L_{ii}\,m_i W_1 + \sum_{j\ne i}\tilde L_{ij}\,m_j W_1 + e_i` (``m`` = the middle
   matrix's rows); the self-loop term dominates and the neighbour terms are uncorrelated with
   :math:`m_i`, so least squares of the received rows on the attacker's own rows,
   :math:`\hat W=(\sum m_i^\top m_i)^{-1}\sum m_i^\top y_i`, estimates :math:`c\,W_1` (c > 0).
   1b. **Refine** (optional): after a first pass of step 2, alternate least squares for each row's
   coefficients on its own and its top-k candidates' rows and for :math:`\hat W`, which removes the
   neighbour cross-talk that biases step 1 on small graphs.
2. **Matched filter.** Remove the self term (projection of :math:`y_i` on :math:`m_i\hat W`) and
   score every candidate j by :math:`\langle r_i, m_j\hat W\rangle / \lVert m_j\hat W\rVert`, summed
   over all releases of i (each with the :math:`X` of its iteration): a neighbour carries a positive
   :math:`\tilde L_{ij}` term, a non-neighbour only cross-talk and noise. Scores are standardised
   per user and symmetrised (a link shows up in both endpoints' rows).

Reported (users with at least one link are the victims; truth = the symmetrised adjacency ``P2``
uses): per-user ROC AUC over all other users (0.5 = random), precision of the top-``deg(i)``
candidates against the random precision ``deg(i)/(N-1)``, and the precision of the global top-|E|
pairs against the link density. With noise off this is close to exact recovery; the DP noise of
``P2`` (calibrated to ``K`` releases) is what the paper relies on.

Only the accounted transcript (``EncMatrix`` payloads, decrypted with ``P1``'s backend) is read;
``crypto='real'`` serialises ciphertexts to bytes, which carry the same plaintexts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from fedgraphrec.attacks.upload_inference import _rank_membership
from fedgraphrec.crypto.he.base import EncMatrix
from fedgraphrec.protocols.p4gcn import roles
from fedgraphrec.runtime.transcript import Transcript

__all__ = ["SOURCES", "LinkInference", "p4gcn_link"]

SOURCES = ("forward", "backward")

Decrypt = Callable[[EncMatrix], np.ndarray]
# one release: rows' users, received rows, candidate users, the candidates' middle-matrix rows
Release = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class LinkInference:
    """Link inference by ``P1`` from one source of sandwiches.

    Attributes:
        victims: users with at least one link.
        auc: per-victim ROC AUC over all other users.
        precision: per-victim precision of the top-``deg`` candidates.
        random_precision: per-victim ``deg / (N - 1)``.
        global_precision: precision of the top-|E| pairs.
        global_random_precision: link density ``|E| / (N (N-1) / 2)``.
        releases: rows attacked (received sandwich rows).
    """

    victims: np.ndarray
    auc: np.ndarray
    precision: np.ndarray
    random_precision: np.ndarray
    global_precision: float
    global_random_precision: float
    releases: int

    def summary(self) -> dict[str, float]:
        """Means over victims and the global figures."""
        return {
            "victims": float(len(self.victims)),
            "rows_attacked": float(self.releases),
            "mean_auc": float(np.nanmean(self.auc)),
            "mean_precision": float(np.mean(self.precision)),
            "mean_random_precision": float(np.mean(self.random_precision)),
            "global_precision": self.global_precision,
            "global_random_precision": self.global_random_precision,
        }


def _matrix(entry: Any, decrypt: Decrypt) -> np.ndarray:
    """Decrypt the one sandwich matrix of a transcript entry (accounted mode: an ``EncMatrix``)."""
    msg = entry.payloads
    if not (len(msg) == 1 and isinstance(msg[0], EncMatrix)):
        raise ValueError(
            f"transcript: {entry.phase!r} payload is not an EncMatrix; run P4GCN with transcripts on "
            "in the accounted network mode (crypto='real' serialises to bytes)"
        )
    return decrypt(msg[0])


def _entries(transcript: Transcript, role: str, phase: str) -> list[Any]:
    return [e for e in transcript.of(role) if e.phase == phase]


def _releases(transcript: Transcript, decrypt: Decrypt, source: str, n: int) -> Iterator[Release]:
    """Replay the protocol from ``P1``'s inbox (sandwiches) and outbox (ids, ``[X]``, ``[G]``)."""
    setup = _entries(transcript, roles.SOCIAL, roles.PH_SETUP_X)
    if not setup:
        raise ValueError("transcript: no set-up [X]; run P4GCN with transcripts on")
    ids = [np.asarray(e.payloads[0]) for e in _entries(transcript, roles.SOCIAL, roles.PH_IDS)]
    if source == "forward":
        x = _matrix(setup[0], decrypt)
        syncs = _entries(transcript, roles.SOCIAL, roles.PH_SYNC)
        fwd = _entries(transcript, roles.RECOMMENDER, roles.PH_FWD)
        if not (len(ids) == len(fwd) == len(syncs)):
            raise ValueError(f"transcript: {len(ids)} batches, {len(fwd)} forwards, {len(syncs)} re-syncs")
        everyone = np.arange(n)
        for users, y_entry, sync in zip(ids, fwd, syncs, strict=True):
            yield users, _matrix(y_entry, decrypt), everyone, x
            x = x.copy()
            x[users] = _matrix(sync, decrypt)  # what P2 holds from the next iteration on
        ev = _entries(transcript, roles.RECOMMENDER, roles.PH_EVAL)
        if ev:  # the final release: every user, in id order, chunk after chunk
            yield everyone, np.vstack([_matrix(e, decrypt) for e in ev]), everyone, x
    elif source == "backward":
        grads = _entries(transcript, roles.SOCIAL, roles.PH_GRAD)
        bwd = _entries(transcript, roles.RECOMMENDER, roles.PH_BWD)
        if not (len(ids) == len(grads) == len(bwd)):
            raise ValueError(f"transcript: {len(ids)} batches, {len(grads)} gradients, {len(bwd)} backwards")
        for users, g_entry, d_entry in zip(ids, grads, bwd, strict=True):
            yield users, _matrix(d_entry, decrypt), users, _matrix(g_entry, decrypt)
    else:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")


def _fit_w(releases: list[Release]) -> np.ndarray:
    """Least squares of received rows on the attacker's own middle rows: ``ĉ W`` (self term)."""
    d = releases[0][1].shape[1]
    gram, cross = np.zeros((d, d)), np.zeros((d, d))
    for users, y, cands, m in releases:
        own = m[np.searchsorted(cands, users)]
        gram += own.T @ own
        cross += own.T @ y
    return np.linalg.lstsq(gram, cross, rcond=None)[0]


def _refine_w(
    releases: list[Release], w: np.ndarray, z: np.ndarray, *, k: int = 4, iters: int = 5, max_rows: int = 4096
) -> np.ndarray:
    """Alternating least squares on the latest rows: each row = own + top-``k`` candidates, times W.

    Given W, each row's coefficients on its own middle row and its ``k`` best-scoring candidates are
    fitted; given the coefficients, W is refitted on the combined middle rows. This removes the
    neighbour cross-talk that biases the self-term fit of step 1 on small graphs.
    """
    atoms, ys = [], []
    for users, y, cands, m in reversed(releases):  # the evaluation release (every user) first
        if len(cands) <= k:
            continue
        pos = np.searchsorted(cands, users)
        zz = z[np.ix_(users, cands)]
        zz[np.arange(len(users)), pos] = -np.inf
        top = np.argpartition(-zz, k - 1, axis=1)[:, :k]
        atoms.append(m[np.concatenate([pos[:, None], top], axis=1)])
        ys.append(y)
        if sum(len(r) for r in ys) >= max_rows:
            break
    if not atoms:
        return w
    A, Y = np.concatenate(atoms), np.concatenate(ys)
    eye = np.eye(k + 1)
    for _ in range(iters):
        w = w / max(np.linalg.norm(w), 1e-300)
        P = A @ w
        gram = P @ P.transpose(0, 2, 1)
        ridge = 1e-9 * np.trace(gram, axis1=1, axis2=2)[:, None, None] + 1e-300
        c = np.linalg.solve(gram + ridge * eye, (P @ Y[..., None]))[..., 0]
        w = np.linalg.lstsq(np.einsum("rk,rkd->rd", c, A), Y, rcond=None)[0]
    return w


def _standardise(s: np.ndarray) -> np.ndarray:
    """Per-user z-scores of the rows with evidence, symmetrised (a link shows in both rows)."""
    seen = np.asarray(s.any(axis=1), dtype=bool).reshape(-1, 1)
    mu = s.mean(1, keepdims=True)
    sd = np.maximum(s.std(1, keepdims=True), 1e-300)
    z = np.where(seen, (s - mu) / sd, 0.0)
    z = z + z.T
    np.fill_diagonal(z, -np.inf)
    return z


def _scores(releases: list[Release], w: np.ndarray, n: int) -> np.ndarray:
    """Summed matched-filter scores ``S[i, j]`` of j being i's neighbour (self term removed)."""
    s = np.zeros((n, n))
    for users, y, cands, m in releases:
        p = m @ w  # each candidate's row as it would enter the sandwich
        own = p[np.searchsorted(cands, users)]
        coef = (y * own).sum(1) / np.maximum((own * own).sum(1), 1e-300)
        r = y - coef[:, None] * own
        pn = p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-300)
        s[np.ix_(users, cands)] += r @ pn.T
    return s


def p4gcn_link(
    transcript: Transcript,
    adjacency: sp.spmatrix,
    decrypt: Decrypt,
    *,
    source: str = "forward",
    oracle_w1: np.ndarray | None = None,
    refine: bool = True,
) -> LinkInference:
    r"""Infer ``P2``'s links from the sandwiches ``P1`` decrypted (see the module docstring).

    Args:
        transcript: the run's transcript (transcripts on, accounted network).
        adjacency: the true social adjacency (only to score the attack; symmetrised here, A1).
        decrypt: ``P1``'s decryption (its backend's ``decrypt``): the key it owns.
        source: ``"forward"`` (training forwards + evaluation release) or ``"backward"``.
        oracle_w1: ``P2``'s true :math:`W_1`, which ``P1`` does **not** hold: only to bound the attack
            from above (it then skips step 1); ``None`` for the real attacker.
        refine: refit W by alternating least squares over the first pass's best candidates (step 1b;
            forward source only: on the backward's in-batch blocks it was measured to hurt).

    Raises:
        ValueError: unknown source, missing or mis-aligned transcript entries, no link in the graph.
    """
    a = sp.csr_matrix(adjacency, dtype=np.float64)
    a = ((a + a.T) > 0).astype(np.float64).tocsr()
    a.setdiag(0)
    a.eliminate_zeros()
    n = a.shape[0]
    rel = list(_releases(transcript, decrypt, source, n))
    if not rel:
        raise ValueError(f"transcript: no {source} sandwiches received by the recommender")
    if oracle_w1 is not None:
        z = _standardise(_scores(rel, oracle_w1 if source == "forward" else oracle_w1.T, n))
    else:
        w = _fit_w(rel)
        z = _standardise(_scores(rel, w, n))
        if refine and source == "forward":
            z = _standardise(_scores(rel, _refine_w(rel, w, z), n))
    deg = np.diff(a.indptr)
    victims = np.flatnonzero(deg > 0)
    if not len(victims):
        raise ValueError("adjacency: no links to infer")
    aucs, precs, rands = [], [], []
    others = np.ones(n, dtype=bool)
    for i in victims:
        truth = np.zeros(n, dtype=bool)
        truth[a.indices[a.indptr[i] : a.indptr[i + 1]]] = True
        others[i] = False  # a user is not its own candidate
        auc, prec, rand = _rank_membership(z[i][others], truth[others])
        others[i] = True
        aucs.append(auc)
        precs.append(prec)
        rands.append(rand)
    iu, ju = np.triu_indices(n, 1)
    n_links = a.nnz // 2
    top = np.argsort(-z[iu, ju], kind="stable")[:n_links]
    hits = np.asarray(a[iu[top], ju[top]]).ravel()
    return LinkInference(
        victims,
        np.array(aucs),
        np.array(precs),
        np.array(rands),
        float(hits.mean()),
        n_links / (n * (n - 1) / 2),
        int(sum(len(r[0]) for r in rel)),
    )
