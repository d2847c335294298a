r"""The LP-GCN client program: a shard of clients (users) on one node, all computed at once.

Set-up stages in :mod:`.client_setup` (Algorithm 2, verification, initial rows), training and
prediction stages in :mod:`.client_train` (Algorithms 1, 4, 5/9, 6, 7 and §4.6), the typed state
in :mod:`.client_state`.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from fedgraphrec.crypto.agreement import ClientKeyPair
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.protocols.lpgcn.client_loss import LossStages
from fedgraphrec.protocols.lpgcn.client_setup import SetupStages
from fedgraphrec.protocols.lpgcn.client_train import TrainingStages
from fedgraphrec.protocols.lpgcn.expect import ExpectedParts
from fedgraphrec.runtime.message import Message

__all__ = ["LPGCNClient", "key_material"]

_PER_MINIBATCH = ("train/", "predict/")
"""Stage prefixes of a training or prediction cycle (:mod:`.roles`), as opposed to ``setup/``."""


class LPGCNClient(SetupStages, TrainingStages, LossStages, ExpectedParts):
    """The LP-GCN client role for a shard of clients (stage methods ``stage_setup_*``, ``stage_train_*``).

    What the node accepts in each stage, and in what order: :class:`~.expect.ExpectedParts`.
    """

    def handle(self, stage: str, step: int, request: Message) -> Message:
        """Answer one request; training and prediction stages run under ``torch.inference_mode``.

        LP-GCN computes every gradient by hand (spec §2.4), so its per-minibatch stages need no
        autograd bookkeeping (version counters and view tracking on each of a few hundred small
        ops: ≈ 2 % of an ML-100K minibatch, ``benchmarks/lpgcn_ab.py``). In process the server's
        step has entered the mode for the whole minibatch already; entering it again in each of
        the 13 stages cost as much as the mode saved, so a node enters it only when it is off (a
        Flower SuperNode). Set-up stages, which create the tables the node keeps, run as usual:
        those stay ordinary tensors, updated in place.
        """
        if stage.startswith(_PER_MINIBATCH) and not torch.is_inference_mode_enabled():
            with torch.inference_mode():  # (in process the server's step already entered it)
                return super().handle(stage, step, request)
        return super().handle(stage, step, request)


def key_material(
    programs: Iterable[LPGCNClient], n_clients: int
) -> tuple[SharedKey | None, list[ClientKeyPair]]:
    """:math:`S` and every client's key pair, read from in-process programs (audits of a coalition).

    What a coalition of clients knows is its members' secrets; an audit picks the members' keys from
    this list. ``real`` crypto mode only (``accounted`` mode draws no keys).

    Raises:
        ValueError: the programs hold no keys (``accounted`` mode).
    """
    key: SharedKey | None = None
    pairs: list[ClientKeyPair | None] = [None] * n_clients
    for program in programs:
        key = key or program.group_key()
        for k, client in enumerate(program.clients.tolist()):
            if len(program.state.private_keys) > k:
                pairs[client] = program.keypair(k)
    if key is None or any(p is None for p in pairs):
        raise ValueError("the programs hold no keys: run LP-GCN with crypto='real'")
    return key, [p for p in pairs if p is not None]
