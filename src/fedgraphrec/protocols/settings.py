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

from fedgraphrec.protocols.secagg.policy import MIN_CLIENTS, check_threshold

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
            :func:`~fedgraphrec.protocols.secagg.policy.check_threshold`).
        secagg_semi_honest: accept a threshold <= 0.5 (honest-but-curious server only).
        crypto: the node's own crypto mode (the run configuration's ``crypto``): in ``real`` a
            node refuses a secure sum the server asks to run ``accounted`` or marks unprotected,
            where it would upload its shard's sum unmasked
            (:class:`~fedgraphrec.protocols.secagg.expect.CheckedSecureSumClient`,
            :mod:`fedgraphrec.protocols.secagg.policy`).
        secagg_min_clients: the fewest clients a secure sum may have; a client refuses a request
            (or a roster) with fewer. The default 3 is the smallest sum in which no single other
            participant learns an input by subtracting its own.

    These are the client's own requirements: a client holds every secure-aggregation request to
    them (:mod:`fedgraphrec.protocols.secagg.policy`), whatever threshold the server asks for.
    """

    frac_bits: int = 32
    secagg_threshold: float = 0.6
    secagg_semi_honest: bool = False
    secagg_min_clients: int = MIN_CLIENTS
    crypto: str = "accounted"

    def __post_init__(self) -> None:
        check_threshold(self.secagg_threshold, self.secagg_semi_honest)
        if self.secagg_min_clients < 1:
            raise ValueError(f"secagg_min_clients must be >= 1, got {self.secagg_min_clients}")
        if self.crypto not in ("real", "accounted"):
            raise ValueError(f"crypto must be 'real' or 'accounted', got {self.crypto!r}")
