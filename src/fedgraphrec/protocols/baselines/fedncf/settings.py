"""FedNCF's settings: every hyper-parameter of a run, every default once."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import ClassVar

from fedgraphrec.protocols.settings import (
    COVER,
    Architecture,
    ModelSettings,
    RoundSampling,
    SecureSumSettings,
)

__all__ = ["FedNCFSettings"]


@dataclass(frozen=True)
class FedNCFSettings(ModelSettings, RoundSampling, SecureSumSettings):
    """What every party knows before the run.

    Attributes:
        model: the backbone: NeuMF (``ncf``) only.
        seed: run seed (client sampling shared with FedGRec; per-user streams for the rest).
        lr: local Adam learning rate.
        reg: L2 weight of the embedding rows in the local loss.
        dim: embedding size ``d``.
        ncf_hidden: MLP widths (empty: FedNCF's ``[32, 16, 8]``).
        secure_cover: draw each user's negatives (and local pairs) from the OS CSPRNG, not its seed
            stream: they hide which queried items are positives (from the run: the default under
            ``crypto = "real"`` unless ``reproducible``).
    """

    MODELS: ClassVar[tuple[str, ...]] = ("ncf",)

    model: str = "ncf"
    ncf_hidden: tuple[int, ...] = ()
    secure_cover: bool = field(default=False, metadata=COVER)

    def __post_init__(self) -> None:
        if self.model != "ncf":
            raise ValueError(f"fedncf trains NeuMF; model must be 'ncf' (got {self.model!r})")
        super().__post_init__()
        object.__setattr__(self, "ncf_hidden", tuple(int(w) for w in self.ncf_hidden))
        if any(w <= 0 for w in self.ncf_hidden):
            raise ValueError(f"ncf_hidden must be positive widths; got {list(self.ncf_hidden)}")

    @property
    def widths(self) -> tuple[int, ...]:
        """The MLP widths."""
        return self.ncf_hidden or (32, 16, 8)

    def architecture(self) -> Architecture:
        """NeuMF with :attr:`widths`."""
        return Architecture(self.model, self.dim, self.init_std, hidden=self.widths)

    def weight_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the shared weights in :func:`~.local.weights_of` order."""
        w, d = self.widths, self.dim
        deep = [s for a, b in itertools.pairwise(w) for s in ((a, b), (b,))]
        return [(d, w[0]), (d, w[0]), (w[0],), *deep, (d + w[-1], 1)]
