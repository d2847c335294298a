r"""GNN4FR: a neighbour infers which items another client holds from the user embeddings it receives.

In GNN4FR every client sends its layer-k user embedding under the shared key :math:`S` to each
neighbour (a client sharing an item), and every client holds :math:`S`: the encryption keeps the
relaying server out, not the neighbours. The layer-1 row a neighbour decrypts is
:math:`U^{(1)}_u = \sum_{i\in\mathcal I_u} c_{ui} V^{(0)}_i`, a weighted sum of the victim's item
embeddings. An attacker that knows the layer-0 item table scores every item i by the normalised
projection :math:`\langle U^{(1)}_u, V^{(0)}_i\rangle / \lVert V^{(0)}_i\rVert^2`: members carry a
:math:`c_{ui}` term, non-members only cross-talk, so the score ranks the victim's items first.

Threat model (stated, not hidden): the attacker knows the item table of the attacked step. At the
first step that table is the shared initialisation, and later every client holds copies of its own
items and receives negatives' embeddings from their designated holders, so this is an upper bound
on the neighbour's knowledge rather than an exact account. Which neighbour sent a row is known from
set-up (the server tells each client its neighbours), passed here as ``senders``.

Reported per victim (attacked once, from the first copy received): ROC AUC over all items (0.5 is a
random guess), and the precision of the top-:math:`|\mathcal I_u|` items against the random-guess
precision :math:`|\mathcal I_u| / N`. The relaying server, which lacks :math:`S`, is scored with a
constant score: a random guess.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.attacks.upload_inference import MembershipRanking, _auc, per_target_means
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.codec import CodecError, decode_rows
from fedgraphrec.runtime.sealing import Binding, GroupChannel, multicast, party_names
from fedgraphrec.runtime.transcript import Transcript

__all__ = ["NeighbourInference", "gnn4fr_neighbour"]


@dataclass(frozen=True)
class NeighbourInference(MembershipRanking):
    """Per attacked victim (ids in ``victims``): AUC and top-|I_u| precision of the membership score."""

    victims: np.ndarray

    def summary(self) -> dict[str, float]:
        """Means over victims (NaN AUCs of degenerate victims skipped)."""
        return per_target_means(self)


def gnn4fr_neighbour(
    transcript: Transcript,
    train: sp.csr_matrix,
    item_table: torch.Tensor,
    senders: np.ndarray | None,
    key: SharedKey | None,
    *,
    phase: str = "forward/l=1/user-embeddings",
) -> NeighbourInference:
    r"""Membership inference of items in neighbours' sets from the first ``phase`` rows received.

    Args:
        transcript: the run's transcript (``crypto="real"``, transcripts on, two or more nodes: one
            node seals a whole part as one batch message).
        train: true training matrix (only to score the attack).
        item_table: layer-0 item embeddings :math:`V^{(0)}` of the attacked step (``N × d``).
        senders: for each forwarded copy, the client whose row it is (``None``: as the relay names
            them, the transcript entry's senders).
        key: :math:`S` (any client has it); ``None`` scores the server, which has no key: it reads
            each payload as a plaintext row, which succeeds only if the rows were not sealed, and
            otherwise is left with a constant score (a random guess).
        phase: the forwarding phase attacked (layer-1 rows by default).

    Raises:
        ValueError: the phase is missing from the clients' transcript, or ``senders`` does not match it.
    """
    entry = next((e for e in transcript.of("client") if e.phase == phase), None)
    if entry is None:
        raise ValueError(f"transcript: no {phase!r} rows received by clients; run with transcripts on")
    if senders is None:
        senders = np.asarray(entry.senders if entry.senders is not None else [], dtype=np.int64)
    if len(entry.payloads) == 1 and len(senders) > 1:
        raise ValueError(
            f"{phase!r} was sealed as one batch (a single in-process node seals a part as one message); "
            "attack a run with two or more nodes, where every forwarded row is a message of its own"
        )
    if len(senders) != len(entry.payloads):
        raise ValueError(f"senders: {len(senders)} ids for {len(entry.payloads)} forwarded rows")
    n_items = train.shape[1]
    if item_table.shape[0] != n_items:
        raise ValueError(f"item_table: {item_table.shape[0]} rows for {n_items} items")
    first: dict[int, int] = {}
    for k, s in enumerate(senders):
        first.setdefault(int(s), k)
    victims = np.array(sorted(first), dtype=np.int64)
    V = item_table.detach().to(torch.float64)
    norms = (V * V).sum(1).clamp_min(1e-300)
    blobs = [entry.payloads[first[int(u)]] for u in victims]
    rows = _read(blobs, victims, entry.step, phase, key, V.shape[1], item_table.dtype)
    read = rows is not None
    scores = (
        ((rows.to(torch.float64) @ V.T) / norms).numpy()
        if rows is not None
        else np.zeros((len(victims), n_items))
    )
    aucs, precs, rands = [], [], []
    for score, u in zip(scores, victims, strict=True):
        truth = np.zeros(n_items, dtype=bool)
        truth[train.indices[train.indptr[u] : train.indptr[u + 1]]] = True
        k = int(truth.sum())
        aucs.append(_auc(score, truth))
        if not read:
            precs.append(float(truth.mean()))  # a tie everywhere: the expected precision of any guess
        else:
            precs.append(float(truth[np.argsort(-score, kind="stable")[:k]].mean()) if k else 0.0)
        rands.append(float(truth.mean()))
    return NeighbourInference(
        auc=np.array(aucs), precision=np.array(precs), random_precision=np.array(rands), victims=victims
    )


def _read(
    blobs: list[bytes],
    victims: np.ndarray,
    step: int,
    phase: str,
    key: SharedKey | None,
    dim: int,
    dtype: torch.dtype,
) -> torch.Tensor | None:
    """The victims' rows as the attacker reads them: opened under S, or parsed as plaintext rows."""
    if key is not None:
        binding = Binding("gnn4fr", phase, step)
        senders = party_names("client", victims.tolist())
        bound_to = [multicast("client")] * len(victims)
        plain = GroupChannel(key, "gnn4fr").open(
            binding, blobs, binding.aads(senders, bound_to), senders, bound_to
        )
        return decode_rows(plain, dim, dtype)
    try:  # a server without S: only rows that were never sealed parse as rows
        return decode_rows(blobs, dim, dtype)
    except CodecError:
        return None
