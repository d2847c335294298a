"""The centralized oracle's settings: the reference every lossless protocol is verified against.

``central`` is not a federated protocol (one party holds every interaction), but it is trained,
configured and listed like one (:mod:`fedgraphrec.protocols.registry`), so its settings sit beside
the protocols' own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fedgraphrec.protocols.settings import Architecture, MinibatchSettings, ModelSettings

__all__ = ["CentralSettings"]


@dataclass(frozen=True)
class CentralSettings(ModelSettings, MinibatchSettings):
    """A centralized model and its Adam.

    Attributes:
        model: ``lightgcn``, ``lightgcn+``, ``mf``, ``ngcf``, ``ncf`` or ``multvae`` (the last three
            centralized only).
        n_layers: propagation layers L (LightGCN, LightGCN+, NGCF).
        ncf_hidden: NCF's MLP widths (empty: ``[2d, d]``, LP-GCN's NCF).
        vae_beta: Mult-VAE's KL weight β (LP-GCN Table 4 grid 0.2–0.8).
        vae_batch_users: Mult-VAE users per minibatch.
    """

    MODELS: ClassVar[tuple[str, ...]] = ("lightgcn", "lightgcn+", "mf", "ngcf", "ncf", "multvae")

    n_layers: int = 3
    ncf_hidden: tuple[int, ...] = ()
    vae_beta: float = 0.2
    vae_batch_users: int = 500

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "ncf_hidden", tuple(int(w) for w in self.ncf_hidden))
        if self.n_layers < 0:
            raise ValueError(f"n_layers must be >= 0; got {self.n_layers}")
        if any(w <= 0 for w in self.ncf_hidden):
            raise ValueError(f"ncf_hidden must be positive widths; got {list(self.ncf_hidden)}")
        if self.vae_beta < 0:
            raise ValueError(f"vae_beta must be >= 0; got {self.vae_beta}")
        if self.vae_batch_users <= 0:
            raise ValueError(f"vae_batch_users must be positive; got {self.vae_batch_users}")

    def architecture(self) -> Architecture:
        """The model with its layers and (NCF) MLP widths."""
        return Architecture(self.model, self.dim, self.init_std, self.n_layers, self.ncf_hidden)
