"""A DGREC neighbour infers a member's private items from the gradient vector it received.

The item-table part of a local gradient is non-zero exactly on the rows the member touched: its
hypergraph nodes (own items, neighbours' public items) and the step's positives and negatives. A
neighbour that receives the **plain** gradient ranks items by the L2 norm of their rows; one that
receives the **one-bit encoding** can only rank by ``|Σ bits|`` of a row (every row of ``±1`` has the
same norm), the best it can do per row. Success is measured on the member's *private* items (those it
did not publicise): hit rate of the top-``k`` guesses against the random-guess rate ``k·|P|/|I|``
(:func:`private_item_hits`), and, with the member's public items set aside (the neighbour received
them at set-up), the ROC AUC of private items against the items the member does not hold and the
precision of the top-``|P|`` guesses (:func:`private_item_ranking`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedgraphrec.attacks.upload_inference import MembershipRanking, _rank_membership
from fedgraphrec.runtime.transcript import Transcript

__all__ = [
    "GradientInference",
    "GradientRanking",
    "first_round_gradients",
    "private_item_hits",
    "private_item_ranking",
]

FIRST_ROUND = "dgrec/flood/round=0"


@dataclass(frozen=True)
class GradientInference:
    """Private-item recovery by a gradient-receiving neighbour.

    Attributes:
        hits: private items among the top-``k`` guesses, summed over targets.
        private: private items of the targets, summed.
        chance: expected hits of random guessing, summed.
        recall: ``hits / private``.
    """

    hits: int
    private: int
    chance: float
    recall: float


def _row_scores(vec: torch.Tensor, n_items: int, d: int) -> torch.Tensor:
    rows = vec[: n_items * d].reshape(n_items, d).to(torch.float64)
    if vec.dtype == torch.int8:
        return rows.sum(1).abs()
    return rows.norm(dim=1)


def private_item_hits(
    received: torch.Tensor, private: list[np.ndarray], n_items: int, d: int, k: int
) -> GradientInference:
    """Score what neighbours received (one row per target: plain float or one-bit int8 vectors).

    Args:
        received: ``[n_targets, n_s]`` vectors as received; the first ``n_items·d`` coordinates are the
            item table's gradient (DGREC's flattening order).
        private: each target's private item ids.
        n_items: item count.
        d: embedding size.
        k: guesses per target.
    """
    if received.shape[0] != len(private):
        raise ValueError(f"received has {received.shape[0]} rows but private lists {len(private)} targets")
    if not 0 < k <= n_items:
        raise ValueError(f"k must be in (0, {n_items}], got {k}")
    hits = total = 0
    chance = 0.0
    for vec, priv in zip(received, private, strict=True):
        top = torch.topk(_row_scores(vec, n_items, d), k).indices.numpy()
        hits += int(np.isin(top, priv).sum())
        total += len(priv)
        chance += k * len(priv) / n_items
    return GradientInference(hits, total, chance, hits / max(total, 1))


@dataclass(frozen=True)
class GradientRanking(MembershipRanking):
    """Per target: AUC of private vs not-held items, top-``|P|`` precision, its random baseline."""


def private_item_ranking(
    received: torch.Tensor, private: list[np.ndarray], known: list[np.ndarray], n_items: int, d: int
) -> GradientRanking:
    """Rank the items a neighbour does not already know a target holds, by the received rows.

    Args:
        received: ``[n_targets, n_s]`` vectors as received (plain float or one-bit int8).
        private: each target's private item ids (the positives).
        known: each target's public item ids (sent to its neighbours at set-up; set aside).
        n_items: item count.
        d: embedding size.

    Raises:
        ValueError: the lists do not match the received rows.
    """
    if not received.shape[0] == len(private) == len(known):
        raise ValueError(
            f"received has {received.shape[0]} rows, private {len(private)} and known {len(known)} targets"
        )
    aucs, precs, rands = [], [], []
    for vec, priv, pub in zip(received, private, known, strict=True):
        cand = np.setdiff1d(np.arange(n_items), pub)
        truth = np.isin(cand, priv)
        auc, prec, rand = _rank_membership(_row_scores(vec, n_items, d).numpy()[cand], truth)
        aucs.append(auc)
        precs.append(prec)
        rands.append(rand)
    return GradientRanking(np.array(aucs), np.array(precs), np.array(rands))


def first_round_gradients(
    transcript: Transcript, phase: str = FIRST_ROUND
) -> tuple[np.ndarray, torch.Tensor]:
    """The encoded gradients neighbours received straight from their originators.

    In flooding round 0 every member sends only its own message to its sampled neighbours, so the
    receiver knows whose gradient it holds (later rounds relay messages under random ids). Returns
    the distinct originators (first message of each, in order received) and their vectors.

    Raises:
        ValueError: no such round in the users' transcript (run DGREC with transcripts on).
    """
    senders: list[int] = []
    vectors: list[torch.Tensor] = []
    seen: set[int] = set()
    for entry in transcript.of("user"):
        if entry.phase != phase or entry.senders is None:
            continue
        for sender, vec in zip(entry.senders, entry.payloads, strict=True):
            if int(sender) not in seen:
                seen.add(int(sender))
                senders.append(int(sender))
                vectors.append(vec)
    if not vectors:
        raise ValueError(f"transcript: no {phase!r} messages received by users; run with transcripts on")
    return np.array(senders, dtype=np.int64), torch.stack(vectors)
