"""What a FedPerGNN node accepts: its stage order, each stage's parts, and the fields it checks.

The server (and the third party it hosts) labels and relays every message, and may lie about all of
it (DESIGN.md, "Threat model"). A node therefore declares, from its own configuration and state,

* the order of its stages (:func:`stage_flow`): the key agreement (with ``setup/wrap`` only on the
  node that hosts the key holder), the expansion, then per step either a round (``train/query``,
  ``train/local``) or a prediction (``predict``, then ``evaluate``); every round and every
  prediction is a step of its own (the server opens one for each), so no stage runs twice in a step;
* every part it expects in each stage (:func:`expectation`): phase, sender role (the third party's
  neighbours, the server's rows), kind, shape, and the run's dtype and embedding width;
* the fields it can judge itself (:func:`sampled_users`, :func:`check_download`,
  :func:`check_public_keys`): the round must be one it has not trained yet (a replayed round would
  redraw the same negatives, pseudo items and seeded noise), the sampled users must be its own users
  with items, each once, and the rows it downloads must be the ones its users asked for.

Every violation is an :class:`~fedgraphrec.crypto.errors.IntegrityError` naming the stage.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.agreement import PUBLIC_KEY_BYTES
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.base import EVALUATE_ITEMS
from fedgraphrec.protocols.baselines.fedpergnn import roles as R
from fedgraphrec.runtime.expect import Expect, Expectation, StageFlow, flow
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = [
    "ST_EVALUATE",
    "check_download",
    "check_public_keys",
    "expectation",
    "sampled_users",
    "stage_flow",
]

ST_EVALUATE = "evaluate"
"""The generic federated-evaluation stage (:meth:`~fedgraphrec.protocols.base.ServerProgram.evaluate`)."""


def stage_flow(local_graph: bool, holds_key: bool) -> StageFlow:
    """The node's stage order.

    Args:
        local_graph: the run expands local graphs (key agreement, third party, ``predict``).
        holds_key: this node hosts the key holder (only it answers ``setup/wrap``).
    """
    if not local_graph:  # federated MF: no key, no third party, evaluation on the users' own rows
        return flow(
            first=[R.ST_EXPAND],
            after={
                R.ST_EXPAND: [R.ST_QUERY, ST_EVALUATE],
                R.ST_QUERY: [R.ST_LOCAL],
                R.ST_LOCAL: [R.ST_QUERY, ST_EVALUATE],
                ST_EVALUATE: [R.ST_QUERY, ST_EVALUATE],
            },
            new_step=[R.ST_QUERY, ST_EVALUATE],
        )
    return flow(
        first=[R.ST_KEYS],
        after={
            R.ST_KEYS: [R.ST_WRAP] if holds_key else [R.ST_UNWRAP],
            R.ST_WRAP: [R.ST_UNWRAP],
            R.ST_UNWRAP: [R.ST_EXPAND],
            R.ST_EXPAND: [R.ST_QUERY, R.ST_PREDICT],
            R.ST_QUERY: [R.ST_LOCAL],
            R.ST_LOCAL: [R.ST_QUERY, R.ST_PREDICT],
            R.ST_PREDICT: [ST_EVALUATE, R.ST_QUERY, R.ST_PREDICT],
            ST_EVALUATE: [R.ST_QUERY, R.ST_PREDICT],
        },
        new_step=[R.ST_QUERY, R.ST_PREDICT],
    )


def expectation(stage: str, local_graph: bool, user: torch.Tensor) -> Expectation:
    """The parts a node expects in ``stage`` (``user``: its users' embeddings, for dtype and width)."""
    dtype, d = user.dtype, int(user.shape[1])

    def rows(phase: str, kind: str, sender: str = R.SERVER) -> Expect:
        return Expect(phase, sender_role=sender, kind=kind, shape="rows", dtype=dtype, width=d)

    if stage == R.ST_WRAP:
        return {R.P_PUBLIC_KEYS: Expect(R.PH_PUBLIC_KEYS, kind=R.K_PUBLIC_KEY, shape="blobs")}
    if stage == R.ST_UNWRAP:
        return {
            R.P_WRAPPED: Expect(R.PH_WRAPPED_KEY, kind=R.K_WRAPPED_KEY, shape="blobs", from_role=R.KEY_HOLDER)
        }
    if stage == R.ST_QUERY and local_graph:
        return {R.P_NEIGHBOURS: rows(R.PH_NEIGHBOURS, R.K_NEIGHBOURS, R.THIRD_PARTY)}
    if stage == R.ST_LOCAL:
        return {R.P_DOWNLOAD: rows(R.PH_DOWNLOAD, R.K_DOWNLOAD)}
    if stage == R.ST_PREDICT:
        items = Expect(R.PH_PREDICT_ITEMS, kind=R.K_ITEMS, shape="broadcast", dtype=dtype, width=d)
        return {
            R.P_NEIGHBOURS: rows(R.PH_PREDICT_NEIGHBOURS, R.K_NEIGHBOURS, R.THIRD_PARTY),
            R.P_ITEMS: items,
        }
    if stage == ST_EVALUATE:  # the server's item table: the users score against it
        return {"items": replace(EVALUATE_ITEMS, dtype=dtype, width=d, optional=False)}
    return {}  # setup/keys, setup/expand, and train/query without local graphs: fields only


def sampled_users(
    request: Message, rows: sp.csr_matrix, clients: np.ndarray, last_round: int
) -> tuple[np.ndarray, int]:
    """The round's sampled users of this node and the round, checked against the node's own state.

    Args:
        request: the ``train/query`` request (fields ``clients`` and ``round``).
        rows: the node's training rows (a user without items is never sampled).
        clients: the node's users (sorted).
        last_round: the last round this node trained (``-1``: none yet).

    Raises:
        IntegrityError: the round is not later than the last one this node trained, or the users
            are not distinct users of this node with items, in order.
    """
    where = f"{R.ST_QUERY}: field"
    round_index = int(request.fields[R.F_ROUND])
    if round_index <= last_round:
        raise IntegrityError(
            f"{where} {R.F_ROUND!r} is {round_index}, but this node already trained round {last_round}; "
            "a round is never run twice"
        )
    ids = np.asarray(request.fields[R.F_CLIENTS], dtype=np.int64).reshape(-1)
    pos = np.minimum(np.searchsorted(clients, ids), max(len(clients) - 1, 0))
    hosted = len(ids) > 0 and len(clients) > 0 and np.array_equal(clients[pos], ids)
    if not hosted or np.any(np.diff(ids) <= 0):
        raise IntegrityError(f"{where} {R.F_CLIENTS!r}: not distinct users of this node in order")
    if np.any(np.diff(rows.indptr)[pos] == 0):
        raise IntegrityError(f"{where} {R.F_CLIENTS!r}: names a user without items (never sampled)")
    return ids, round_index


def check_download(part: Part, clients: np.ndarray, counts: np.ndarray) -> None:
    """The rows of ``train/local`` are one block per sampled user, of the size its query asked for.

    Raises:
        IntegrityError: other receivers or other block sizes than the node's own query.
    """
    if part.receivers is None or not np.array_equal(part.receivers, clients):
        raise IntegrityError(f"{R.ST_LOCAL}: part {R.P_DOWNLOAD!r} is for users other than the sampled ones")
    if part.counts is None or not np.array_equal(part.counts, counts):
        raise IntegrityError(f"{R.ST_LOCAL}: part {R.P_DOWNLOAD!r} does not hold one row per queried item")


def check_public_keys(part: Part, n_users: int) -> bytes:
    """The key holder's bundle: one blob of exactly one 32-byte public key per user of the run.

    Raises:
        IntegrityError: more or fewer keys than the run has users.
    """
    value = part.value if part.value is not None else []
    if len(value) != 1 or len(value[0]) != PUBLIC_KEY_BYTES * n_users:
        got = sum(len(b) for b in value) // PUBLIC_KEY_BYTES
        raise IntegrityError(
            f"{R.ST_WRAP}: part {R.P_PUBLIC_KEYS!r} holds {got} public key(s) in {len(value)} blob(s); "
            f"this run has {n_users} users"
        )
    return bytes(value[0])
