"""Server-side interaction inference from users' item-embedding uploads (FedeRank, FCF, FedGRec).

A user's item update is non-zero only on the rows it touched (positives, and the negatives it was
paired with), and a positive is touched in *every* local step, a negative in few: the size of a
row's update separates them. The attacker is the server; it reads only what it received:

* unprotected uploads (``kind="plain-upload"``): the user's own rows (entries ``(flat index,
  value)``, or blocks of rows at start indices); each item is scored by the norm of its update
  (0 if absent);
* secure-aggregation uploads (``kind="secagg-masked-input"``): one masked ring vector per user; the
  attacker decodes it as fixed point anyway and scores every item by its row's norm.

The score is compared with the truth (the user's training items) by ROC AUC per user (0.5 is a
random guess), together with the precision of the upload's support taken as the guess.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import scipy.sparse as sp
from scipy.stats import rankdata

from fedgraphrec.runtime.transcript import Transcript

__all__ = ["MembershipRanking", "UploadInference", "per_target_means", "upload_inference"]


@dataclass(frozen=True)
class UploadInference:
    """Per attacked upload: AUC of the row-norm score and precision of the support as a guess."""

    auc: np.ndarray
    support_precision: np.ndarray  # NaN for masked uploads (dense: no support to read)
    random_precision: np.ndarray  # |N_u| / N: precision of a random guess

    def summary(self) -> dict[str, float]:
        """Means over attacked uploads."""
        out = {"uploads": float(len(self.auc)), "mean_auc": float(np.mean(self.auc))}
        if np.isfinite(self.support_precision).any():
            out["mean_support_precision"] = float(np.nanmean(self.support_precision))
        out["mean_random_precision"] = float(np.mean(self.random_precision))
        return out


def per_target_means(result: object, count: str = "victims") -> dict[str, float]:
    """The summary of a dataclass of per-target arrays: the target count, then each array's mean.

    The count is the length of the first field and is reported under ``count``; a field named
    ``count`` (the targets' ids) is not averaged. ``auc`` is averaged with ``nanmean``, since a target
    with no positives or no negatives has an undefined AUC; every other field with ``mean``. Keys
    keep the fields' order, so reports list them as the result class declares them.
    """
    arrays = {f.name: getattr(result, f.name) for f in fields(result)}  # type: ignore[arg-type]
    out = {count: float(len(next(iter(arrays.values()))))}
    for name, values in arrays.items():
        if name != count:
            out[f"mean_{name}"] = float(np.nanmean(values) if name == "auc" else np.mean(values))
    return out


@dataclass(frozen=True)
class MembershipRanking:
    """Per attacked target: membership-score AUC, top-|positives| precision and random-guess precision.

    The three numbers :func:`_rank_membership` returns for one target, stacked over the targets.
    """

    auc: np.ndarray
    precision: np.ndarray
    random_precision: np.ndarray

    def summary(self) -> dict[str, float]:
        """Means over targets (NaN AUCs of degenerate targets skipped)."""
        return per_target_means(self, count="targets")


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Mann–Whitney AUC (ties count half) of ``scores`` for the boolean ``labels``."""
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if not n_pos or not n_neg:
        return float("nan")
    ranks = rankdata(scores)  # average ranks over ties
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _rank_membership(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float, float]:
    """``(AUC, precision of the top-|positives|, random-guess precision)`` of one target's scores.

    Ties in the top-k are broken by position (stable sort); no positives gives precision 0.
    """
    k = int(labels.sum())
    top = np.argsort(-scores, kind="stable")[:k]
    precision = float(labels[top].mean()) if k else 0.0
    return _auc(scores, labels), precision, k / max(len(labels), 1)


def _plain_scores(payload: object, n_items: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Items in a plain upload's item block and each item's update norm.

    Two layouts: rows ``(flat index, value)`` (party programs' secure-sum baseline; the item block
    is the first ``n_items · dim`` indices) or a list of ``(start indices, rows)`` blocks, the first
    being the item update (one row of width ``dim`` per item).
    """
    if isinstance(payload, list | tuple):
        starts, values = payload[0]
        items = np.asarray(starts) // dim
        score = np.zeros(n_items)
        score[items] = np.linalg.norm(np.asarray(values), axis=1)
        return items, score
    rows = np.asarray(payload)
    first = rows[:, 0] < n_items * dim
    items = rows[first, 0].astype(np.int64) // dim
    return items, np.sqrt(np.bincount(items, weights=rows[first, 1] ** 2, minlength=n_items))


def upload_inference(
    transcript: Transcript,
    train: sp.csr_matrix,
    dim: int,
    *,
    phase: str = "train/upload",
    frac_bits: int = 32,
) -> UploadInference:
    """Score every training upload the server received; block 0 is the ``N × dim`` item update.

    Args:
        transcript: the protocol's transcript (transcripts on).
        train: true training matrix (only to score the attack).
        dim: embedding size (row width of the item block).
        phase: phase prefix of the uploads.
        frac_bits: fixed-point bits the attacker decodes masked vectors with.

    Raises:
        ValueError: no uploads of that phase in the server's transcript.
    """
    n_items = train.shape[1]
    aucs, precisions, randoms = [], [], []
    for entry in transcript.of("server"):
        if not entry.phase.startswith(phase) or entry.senders is None:
            continue
        if entry.kind not in ("plain-upload", "secagg-masked-input"):  # keys and shares: not uploads
            continue
        for user, payload in zip(entry.senders, entry.payloads, strict=True):
            truth = np.zeros(n_items, dtype=bool)
            truth[train.indices[train.indptr[user] : train.indptr[user + 1]]] = True
            score = np.zeros(n_items)
            if entry.kind == "plain-upload":
                items, score = _plain_scores(payload, n_items, dim)
                support = np.zeros(n_items, dtype=bool)
                support[items] = True
                precisions.append(truth[support].mean() if support.any() else 0.0)
            elif entry.kind == "secagg-masked-input":
                block = np.asarray(payload).ravel()[: n_items * dim].view(np.int64).reshape(n_items, dim)
                score = np.linalg.norm(np.ldexp(block.astype(np.float64), -frac_bits), axis=1)
                precisions.append(np.nan)
            else:
                continue
            aucs.append(_auc(score, truth))
            randoms.append(truth.mean())
    if not aucs:
        raise ValueError(f"no {phase!r} uploads in the server's transcript; run with transcripts on")
    return UploadInference(np.array(aucs), np.array(precisions, dtype=float), np.array(randoms))
