"""What a FedNCF node accepts: its stage order, each stage's parts, and the secure sum it expects.

A node declares from its own configuration and state (DESIGN.md, "Threat model"; issue 30 §1):

* the order of its stages (:func:`stage_flow`): enrolment, then per step either a round
  (``train/query``, ``train/local``, then one secure sum of the deltas) or an evaluation; every
  round and every prediction opens a step of its own (the server opens one for each);
* every part it expects (:func:`expectation`): the downloaded rows (the run's dtype, ``2d`` wide),
  secure aggregation's parts under the prefix ``train/upload``, and the evaluation's item tables and
  weights;
* the secure sum it takes part in (:func:`sum_site`): the round it queried, its sampled users, the
  input length and the fixed-point bits of its own settings, so a server cannot make it mask
  another input, for another session or clients, or run a second sum.

The round's fields are checked as FedPerGNN's (:func:`~..fedpergnn.expect.sampled_users`,
:func:`~..fedpergnn.expect.check_download`): the two round-based baselines share them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.baselines.fedncf import roles as R
from fedgraphrec.protocols.baselines.shard_sampling import ShardRound
from fedgraphrec.protocols.secagg.expect import SECURE_STAGES, SumSite, merge_edges, sum_edges
from fedgraphrec.runtime.expect import Expect, Expectation, StageFlow, flow

__all__ = [
    "ST_EVALUATE",
    "expectation",
    "session",
    "stage_flow",
    "sum_site",
    "weights_length",
]

ST_EVALUATE = "evaluate"
"""The generic federated-evaluation stage (:meth:`~fedgraphrec.protocols.base.ServerProgram.evaluate`)."""


def session(round_index: int) -> str:
    """The secure-sum session of a round (bound into every key and mask of the sum)."""
    return f"fedncf/round/{round_index}"


def stage_flow() -> StageFlow:
    """Enrolment once; per step a round (query, local, the secure sum) or an evaluation."""
    starts = [R.ST_QUERY, ST_EVALUATE]
    own = {R.ST_SETUP: starts, R.ST_QUERY: [R.ST_LOCAL], ST_EVALUATE: starts}
    return flow(
        first=[R.ST_SETUP],
        after=merge_edges(own, sum_edges([R.ST_LOCAL], starts)),
        new_step=starts,
    )


def weights_length(shapes: Sequence[tuple[int, ...]]) -> int:
    """The number of shared weights (the length of the flat ``weights`` the server sends)."""
    total = 0
    for shape in shapes:
        n = 1
        for s in shape:
            n *= int(s)
        total += n
    return total


def expectation(stage: str, user: torch.Tensor, sum_parts: Expectation | None = None) -> Expectation:
    """The parts a node expects in ``stage`` (``user``: a user table, for the dtype and ``d``).

    ``sum_parts``: secure aggregation's expectation of ``stage`` (the program computes it from its
    :func:`sum_site`).
    """
    dtype, d = user.dtype, int(user.shape[1])
    if stage == R.ST_LOCAL:
        rows = Expect(R.PH_DOWNLOAD, kind=R.K_DOWNLOAD, shape="rows", dtype=dtype, width=2 * d)
        return {R.P_DOWNLOAD: rows}
    if stage == ST_EVALUATE:  # the item tables and the weights: each user scores through NeuMF
        return {
            R.P_ITEMS: Expect(
                "evaluate/items", kind="item_embedding", shape="broadcast", dtype=dtype, width=2 * d
            ),
            R.P_WEIGHTS: Expect("evaluate/weights", kind="weights", shape="broadcast", dtype=dtype),
        }
    if stage in SECURE_STAGES:
        return dict(sum_parts or {})
    return {}  # setup and train/query carry fields only


def sum_site(
    stage: str, occurrence: int, sr: ShardRound | None, has_deltas: bool, length: int, frac_bits: int
) -> SumSite:
    """The secure sum this node expects now: its round's deltas, once per round.

    Raises:
        IntegrityError: the node has no local update to sum (no round queried and trained), or a
            sum already ran this step.
    """
    if sr is None or not has_deltas or occurrence > 0:
        raise IntegrityError(
            f"fedncf: secure aggregation stage {stage!r}: this node has no local update to aggregate now"
        )
    return SumSite(R.PH_UPLOAD, session(sr.round_index), length, sr.clients, frac_bits)
