"""FedMF's settings (one frozen dataclass, every default once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fedgraphrec.protocols.settings import MinibatchSettings, ModelSettings, SecureSumSettings

__all__ = ["FedMFSettings"]


@dataclass(frozen=True)
class FedMFSettings(ModelSettings, MinibatchSettings, SecureSumSettings):
    """Hyper-parameters of FedMF.

    Attributes:
        model: the backbone: matrix factorisation (``mf``) only.
        lr: Adam learning rate of the users (own rows) and of the server (item table).
        reg: ``λ`` of the layer-0 L2 term.
        frac_bits: fixed-point fractional bits of the secure sum; float64 verification against the
            centralized oracle wants ≥ 40 (Adam divides by the running gradient magnitude, so an
            item with a tiny summed gradient feels the rounding; 32 gives deviations near 1e-7).
        secagg_threshold: fraction of a minibatch's users secure aggregation needs (> 0.5; see
            :func:`~fedgraphrec.protocols.secagg.policy.check_threshold`).
    """

    MODELS: ClassVar[tuple[str, ...]] = ("mf",)

    model: str = "mf"

    def __post_init__(self) -> None:
        if self.model != "mf":
            raise ValueError(f"fedmf is matrix factorisation; model must be 'mf' (got {self.model!r})")
        super().__post_init__()
