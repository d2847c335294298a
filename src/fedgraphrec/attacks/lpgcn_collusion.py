"""LP-GCN: a server colluding with ``c`` clients recovers other clients' real interactions.

LP-GCN hides a client's items behind HMAC tokens under the shared key :math:`S` and pads them with
α virtual items (spec ``lpgcn.md`` §4). Every client holds :math:`S`, so one colluding client is
enough to turn the server's token graph back into item ids: the server then knows each client's
*held* set, real items and α virtual ones, indistinguishable. What tells them apart is verification:
a convolution-client learns, for each of its convolution-items, which holders are real. Colluding
convolution-clients open the sealed answers the server relayed to them, so the coalition learns the
real/virtual status of every (holder, item) edge whose item a colluder convolves.

The attacker reads only what the coalition received: the server's ``setup/item-tokens`` uploads, the
verification questions it relayed (which holder was asked about which token by whom) and the
``setup/verification-answer`` ciphertexts it relayed to colluding convolution-clients, :math:`S` and
the colluders' private keys. Victims are the
non-colluding clients; the score of item i for victim u is 1 (verified real), 0 (verified virtual or
not held) or 0.5 (held, status unknown). Reported per victim:

* ``recovered``: fraction of the real items verified real (certain knowledge);
* ``held_precision``: precision of the held set taken as the guess (what α buys: about
  :math:`|I_u| / (|I_u| + α)`), recall 1;
* ``precision``/``recall`` of the guess "held and not verified virtual";
* ROC AUC of the score (0.5 = random), and the random-guess precision :math:`|I_u| / N`.

Without :math:`S` (c = 0) tokens are opaque and the attacker is left with a random guess.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fedgraphrec.attacks.upload_inference import _auc, per_target_means
from fedgraphrec.crypto.agreement import ClientKeyPair
from fedgraphrec.crypto.ecies import open_sealed
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.crypto.tokens import TOKEN_BYTES, ItemTokenizer
from fedgraphrec.protocols.lpgcn.holdings import verification_aad
from fedgraphrec.runtime.transcript import Transcript

__all__ = ["CollusionResult", "lpgcn_collusion"]


@dataclass(frozen=True)
class CollusionResult:
    """Per victim (non-colluding client): the coalition's knowledge of its real items."""

    victims: np.ndarray
    recovered: np.ndarray
    held_precision: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    auc: np.ndarray
    random_precision: np.ndarray

    def summary(self) -> dict[str, float]:
        """Means over victims (NaN AUCs of degenerate victims skipped)."""
        return per_target_means(self)


def _entries(transcript: Transcript, role: str, phase: str) -> list[tuple[int, int, bytes]]:
    """``(sender, receiver, payload)`` of every message of ``phase`` that ``role`` received, in order."""
    out = []
    for e in transcript.of(role):
        if e.phase == phase and e.senders is not None and e.receivers is not None:
            out += list(zip(e.senders, e.receivers, e.payloads, strict=True))
    return out


def _held_sets(transcript: Transcript, shared_key: SharedKey | None, n_items: int) -> dict[int, np.ndarray]:
    """Each client's held items, decoded from its uploaded tokens with S (empty without S)."""
    uploads = [
        (u, blob)
        for e in transcript.of("server")
        if e.phase == "setup/item-tokens" and e.senders is not None
        for u, blob in zip(e.senders, e.payloads, strict=True)
    ]
    if not uploads:
        raise ValueError("transcript: no setup/item-tokens uploads; run with crypto='real', transcripts=True")
    if shared_key is None:
        return {int(u): np.zeros(0, dtype=np.int64) for u, _ in uploads}
    lookup = {tok: i for i, tok in enumerate(ItemTokenizer(shared_key).tokens(np.arange(n_items)))}
    held = {}
    for user, blob in uploads:
        if not isinstance(blob, bytes):
            raise ValueError("transcript: token uploads are not bytes; run with crypto='real'")
        toks = [blob[k : k + TOKEN_BYTES] for k in range(0, len(blob), TOKEN_BYTES)]
        held[int(user)] = np.sort(np.array([lookup[t] for t in toks], dtype=np.int64))
    return held


def lpgcn_collusion(
    transcript: Transcript,
    train: sp.csr_matrix,
    colluders: Collection[int],
    shared_key: SharedKey | None,
    keypairs: Sequence[ClientKeyPair] | None,
) -> CollusionResult:
    r"""Attack the non-colluding clients' real items from the coalition's view of LP-GCN's set-up.

    Args:
        transcript: the run's transcript (``crypto="real"``, transcripts on).
        train: true training matrix (only to score the attack).
        colluders: ids of the colluding clients (``c = len(colluders)``).
        shared_key: :math:`S` (``None`` models a coalition without any client: c = 0).
        keypairs: all clients' key pairs; only the colluders' private keys are used.

    Raises:
        ValueError: no set-up uploads in the transcript, or colluders given without S / keys.
    """
    n_users, n_items = train.shape
    col = {int(c) for c in colluders}
    if col and (shared_key is None or keypairs is None):
        raise ValueError(
            "colluders: a coalition with clients holds S and their keys; pass shared_key/keypairs"
        )
    if any(c < 0 or c >= n_users for c in col):
        raise ValueError(f"colluders: ids must be in [0, {n_users}), got {sorted(col)}")
    held = _held_sets(transcript, shared_key if col else None, n_items)
    # verification answers relayed to colluding convolution-clients; the k-th answer of a holder to
    # an asker answers the k-th question that asker put to that holder (the server keeps the order)
    status: dict[tuple[int, int], bool] = {}  # (holder, item) -> is virtual
    if col and keypairs is not None and shared_key is not None:
        lookup = {tok: i for i, tok in enumerate(ItemTokenizer(shared_key).tokens(np.arange(n_items)))}
        asked: dict[tuple[int, int], list[bytes]] = {}
        for asker, holder, token in _entries(transcript, "client", "setup/verification-question"):
            asked.setdefault((int(holder), int(asker)), []).append(token)
        seen: dict[tuple[int, int], int] = {}
        for holder, asker, blob in _entries(transcript, "conv-client", "setup/verification-answer"):
            pair = (int(holder), int(asker))
            k = seen[pair] = seen.get(pair, -1) + 1
            if pair[1] in col:
                token = asked[pair][k]
                aad = verification_aad(pair[0], pair[1], token)
                status[(pair[0], lookup[token])] = bool(open_sealed(blob, keypairs[pair[1]], aad=aad)[0])
    out: dict[str, list[float]] = {k: [] for k in ("rec", "hp", "p", "r", "auc", "rand")}
    victims = [u for u in range(n_users) if u not in col]
    for u in victims:
        truth = np.zeros(n_items, dtype=bool)
        truth[train.indices[train.indptr[u] : train.indptr[u + 1]]] = True
        score = np.full(n_items, 0.5) if not col else np.zeros(n_items)
        for i in held[u] if col else ():
            known = status.get((u, int(i)))
            score[i] = 0.5 if known is None else (0.0 if known else 1.0)
        guess = score >= 0.5 if col else np.zeros(n_items, dtype=bool)
        n_true = max(int(truth.sum()), 1)
        out["rec"].append(float((truth & (score == 1.0)).sum() / n_true))
        out["hp"].append(float(truth[held[u]].mean()) if len(held[u]) else float(truth.mean()))
        out["p"].append(float(truth[guess].mean()) if guess.any() else float(truth.mean()))
        out["r"].append(float((truth & guess).sum() / n_true))
        out["auc"].append(_auc(score, truth))
        out["rand"].append(float(truth.mean()))
    return CollusionResult(
        np.array(victims), *(np.array(out[k]) for k in ("rec", "hp", "p", "r", "auc", "rand"))
    )
