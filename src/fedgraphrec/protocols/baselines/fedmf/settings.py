"""FedMF's settings (one frozen dataclass, every default once)."""

from __future__ import annotations

from dataclasses import dataclass

from fedgraphrec.protocols.settings import SecureSumSettings

__all__ = ["FedMFSettings"]


@dataclass(frozen=True)
class FedMFSettings(SecureSumSettings):
    """Hyper-parameters of FedMF.

    Attributes:
        lr: Adam learning rate of the users (own rows) and of the server (item table).
        reg: ``λ`` of the layer-0 L2 term.
        frac_bits: fixed-point fractional bits of the secure sum; float64 verification against the
            centralized oracle wants ≥ 40 (Adam divides by the running gradient magnitude, so an
            item with a tiny summed gradient feels the rounding; 32 gives deviations near 1e-7).
        secagg_threshold: fraction of a minibatch's users secure aggregation needs (> 0.5; see
            :func:`~fedgraphrec.protocols.secagg.policy.check_threshold`).
        secagg_semi_honest: accept a threshold ≤ 0.5 (honest-but-curious server only).
        secagg_min_clients: the fewest users a secure sum may have (default 3).
        crypto: the client's own crypto mode; in ``real`` it refuses unprotected secure-sum stages.
    """

    lr: float = 1e-3
    reg: float = 1e-4

    def __post_init__(self) -> None:
        if not 8 <= self.frac_bits <= 48:
            raise ValueError(f"frac_bits must be in [8, 48], got {self.frac_bits}")
        super().__post_init__()
