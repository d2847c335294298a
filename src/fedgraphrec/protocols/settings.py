"""Settings fields that several protocols share, each with its default stated once.

A protocol's settings dataclass (``<protocol>/settings.py``) inherits the groups it uses instead of
repeating their fields, defaults and checks:

* :class:`RoundSampling` — the round-based protocols that sample ``S`` users per round from
  FedGRec's public stream and train them locally (FedGRec, FedNCF, FedPerGNN);
* :class:`SecureSumSettings` — the protocols whose server learns only secure sums (FedGRec, FedMF,
  FedNCF, P-GCN): the fixed-point resolution and the secure-aggregation threshold.

Each subclass still documents every field in its own docstring (the documentation's settings
tables read a class's ``Attributes:`` section), since the meaning of ``lr`` or ``reg`` differs a
little between protocols.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedgraphrec.protocols.secagg.upload import check_threshold

__all__ = ["RoundSampling", "SecureSumSettings"]


@dataclass(frozen=True)
class RoundSampling:
    """Users sampled per round and their local training.

    Attributes:
        seed: run seed (the public stream of each round's users).
        clients_per_round: ``S``, users sampled per round (without replacement).
        local_steps: ``τ``, local Adam steps per round.
        n_negatives: negatives each sampled user queries per round.
        lr: local Adam learning rate.
        reg: L2 weight of the local loss.
    """

    seed: int = 2020
    clients_per_round: int = 400
    local_steps: int = 10
    n_negatives: int = 2048
    lr: float = 1e-3
    reg: float = 1e-4


@dataclass(frozen=True)
class SecureSumSettings:
    """How the users' uploads are summed securely.

    Attributes:
        frac_bits: fixed-point fractional bits of the secure sum.
        secagg_threshold: fraction of a sum's users secure aggregation needs (> 0.5; see
            :func:`~fedgraphrec.protocols.secagg.check_threshold`).
        secagg_semi_honest: accept a threshold <= 0.5 (honest-but-curious server only).
        crypto: the node's own crypto mode (the run configuration's ``crypto``): in ``real`` a
            node refuses a secure sum the server asks to run ``accounted``, where it would upload
            its shard's sum unmasked
            (:class:`~fedgraphrec.protocols.secagg.expect.CheckedSecureSumClient`).
    """

    frac_bits: int = 32
    secagg_threshold: float = 0.6
    secagg_semi_honest: bool = False
    crypto: str = "accounted"

    def __post_init__(self) -> None:
        check_threshold(self.secagg_threshold, self.secagg_semi_honest)
