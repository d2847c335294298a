"""FedPerGNN's settings: every hyper-parameter of a run, every default once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from fedgraphrec.protocols.settings import COVER, HIDING, ModelSettings, RoundSampling

__all__ = ["FedPerGNNSettings"]


@dataclass(frozen=True)
class FedPerGNNSettings(ModelSettings, RoundSampling):
    r"""What every party knows before the run (the package docstring explains each mechanism).

    Attributes:
        model: the user and item tables' backbone: ``lightgcn`` or ``mf``.
        seed: run seed (client sampling shared with FedGRec; per-client streams for negatives,
            local pairs, pseudo items and seeded noise).
        loss: ``bpr`` (FedGNN+BPR) or ``mse`` (FedGNN).
        n_pseudo: pseudo-interacted items per user and round, 0: off.
        ldp_clip: :math:`\delta`, per-coordinate clipping of uploads, 0: none.
        ldp_scale: :math:`\lambda`, Laplace noise scale, 0: none.
        secure_noise: override of ``reproducible`` for the Laplace noise (unset: follow it): from the
            OS CSPRNG the stated ε holds against whoever has ``config.toml``.
        secure_cover: draw negatives, local pairs and pseudo items (and their rows) from the OS
            CSPRNG instead of each user's seed streams (from the run, as ``secure_noise``): they
            hide which uploaded items are real.
        local_graph: expand local graphs through the third party; ``false``: :math:`h_u = e_u`,
            federated MF with the same uploads (DGREC's FedRec baseline).
    """

    MODELS: ClassVar[tuple[str, ...]] = ("lightgcn", "mf")

    loss: str = "bpr"
    n_pseudo: int = 20
    ldp_clip: float = 0.01
    ldp_scale: float = 0.001
    secure_noise: bool | None = field(default=None, metadata=HIDING)
    secure_cover: bool = field(default=False, metadata=COVER)
    local_graph: bool = True

    def __post_init__(self) -> None:
        if self.model not in self.MODELS:
            raise ValueError(
                f"fedpergnn trains user and item tables; model must be lightgcn or mf (got {self.model!r})"
            )
        super().__post_init__()
        for name in ("n_pseudo", "ldp_clip", "ldp_scale"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.loss not in ("bpr", "mse"):
            raise ValueError(f"loss must be 'bpr' or 'mse', got {self.loss!r}")
