"""DGREC's settings: one frozen dataclass for the protocol, its local model, its variant and its run.

:class:`DGRECSettings` is the whole configuration of a DGREC run (``train dgrec`` reads it from TOML
and ``--set``); :meth:`DGRECSettings.for_variant` builds the settings of a named variant
(:data:`VARIANTS`: DGREC, its ablations, the no-noise reference and the DMF / DLGNN baselines), with
values the caller gives winning over the variant's own. The local model's shape is
:attr:`DGRECSettings.local_model`, built from the flat model fields.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fedgraphrec.protocols.dgrec.model import ModelConfig
from fedgraphrec.protocols.settings import HIDING, ProtocolSettings

__all__ = ["SHARING", "STEP_PATHS", "VARIANTS", "DGRECSettings"]

SHARING = ("one_bit", "laplace", "clipped", "plain", "none")
STEP_PATHS = ("auto", "reference")

VARIANTS: dict[str, dict[str, Any]] = {
    "dgrec": {},
    "non-item-graph": {"item_graph": False, "pearson": False},
    "non-neighbor": {"neighbours": False},
    "non-hypergraph": {"hypergraph": False},
    "non-attention": {"attention": False},
    "non-pearson": {"pearson": False},
    "non-sharing": {"sharing": "laplace"},
    "local-only": {"sharing": "none"},
    "no-noise": {"sharing": "clipped"},  # reference: DGREC's clipped mean without the encoding
    # the baselines share plain float gradients (no clip bound), so they keep the per-pair mean loss
    # under which their documented learning rates (5 / 20, results/dgrec/README.md) were chosen
    "dmf": {"kind": "mf", "loss_scale": "mean", "sharing": "plain", "hops": 1, "lr": 5.0},
    "dlgnn": {"kind": "lgn", "loss_scale": "mean", "sharing": "plain", "hops": 1, "lr": 20.0},
}
"""Each variant's values, by field name (the rest are the defaults of :class:`DGRECSettings`)."""

_MODEL_FIELDS = tuple(f.name for f in dataclasses.fields(ModelConfig))


@dataclass(frozen=True)
class DGRECSettings(ProtocolSettings, ModelConfig):
    """DGREC's settings (defaults: the paper's H = 4, n_u = 3, δ = 0.1, β = 1; lr 0.6 for the Eq.-2 loss).

    The local model's fields (``kind`` … ``loss_scale``) are :class:`~.model.ModelConfig`'s,
    inherited with its defaults; :attr:`local_model` is them as a :class:`~.model.ModelConfig`.

    lr: under one-bit sharing a decoded step moves a coordinate by at most ``lr·δ`` in expectation,
    so with the Eq.-2 loss scale (per-user gradients of the order of δ) the working range is about
    0.3–3 (``results/dgrec/README.md``); the paper's grid (≤ 0.01) is not in these units.

    Attributes:
        variant: the variant these settings were built for (one of :data:`VARIANTS`; a record only:
            :meth:`for_variant` applies its values).
        kind: local model: ``"dgrec"``, ``"mf"`` (DMF baseline) or ``"lgn"`` (DLGNN baseline).
        d: item embedding size.
        n_interests: number of interests n_i.
        d_interest: interest dimension d_i.
        hidden: the scorer MLP's two hidden sizes.
        item_graph: ``False`` is the w/non-item-graph ablation.
        attention: ``False`` is the w/non-attention ablation.
        pearson: ``False`` is the w/non-pearson ablation.
        l2: L2 weight λ on the parameters touched in a step.
        loss_scale: ``"eq2"`` (sampled estimate of the paper's Eq.-2 sum over negatives) or ``"mean"``
            (per-pair mean); see :mod:`fedgraphrec.protocols.dgrec.model`.
        hops: sampling hops H (the group's flooding takes 2H rounds).
        fanout: neighbours n_u drawn per expanded user.
        delta: per-coordinate clip bound δ.
        beta: one-bit encoding's perturbation β (also the Laplace budget of w/non-sharing).
        lr: SGD learning rate.
        batch: BPR positives per member and step (one uniform negative each).
        max_items: cap on the nodes of a user's inner-item hypergraph.
        public_ratio: fraction of its training items each user publicises.
        neighbours: ``False`` is the w/non-neighbor ablation (own items only in the hypergraph).
        hypergraph: ``False`` is the w/non-item-hypergraph ablation (item–tag bipartite graph).
        sharing: ``one_bit`` (DGREC), ``laplace``, ``clipped``, ``plain`` or ``none``.
        centres_per_epoch: group centres per epoch, drawn without replacement from the users with
            training items (at most that many; ``None``: every one of them).
        step_path: ``"auto"``: the exact fast group step (:mod:`.fast_step`: sparse gradients, the
            group's sum of encodings drawn directly, the ledger from the flooding tree) wherever no
            individual message is observed (no transcripts; sharing other than ``laplace``), else the
            reference step (individual encodings flooded peer to peer); ``"reference"``: always the
            reference step. The run summary's ``dgrec_path`` says which ran.
        secure_noise: draw the one-bit encodings' Bernoulli thresholds and the Laplace noise from the
            OS CSPRNG instead of the run seed (the stated LDP ε then holds against whoever knows the
            seed; runs no longer repeat bit for bit). Unset: follow the run's ``reproducible``
            (``--crypto real`` draws them securely unless ``reproducible = true``).
        secure_sampling: draw each group's members (and their BPR negatives) from a fresh CSPRNG
            stream per step instead of the seeded stream ``("sample", step)``. Unset: as
            ``secure_noise``.
    """

    variant: str = "dgrec"
    hops: int = 4
    fanout: int = 3
    delta: float = 0.1
    beta: float = 1.0
    lr: float = 0.6
    batch: int = 16
    max_items: int = 128
    public_ratio: float = 1.0
    neighbours: bool = True
    hypergraph: bool = True
    sharing: str = "one_bit"
    centres_per_epoch: int | None = 300
    step_path: str = "auto"
    secure_noise: bool | None = field(default=None, metadata=HIDING)
    secure_sampling: bool | None = field(default=None, metadata=HIDING)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}; got {self.variant!r}")
        if self.sharing not in SHARING:
            raise ValueError(f"sharing must be one of {SHARING}, got {self.sharing!r}")
        if self.step_path not in STEP_PATHS:
            raise ValueError(f"step_path must be one of {STEP_PATHS}, got {self.step_path!r}")
        if self.lr <= 0 or self.batch < 1:
            raise ValueError(f"lr must be > 0 and batch >= 1, got lr={self.lr}, batch={self.batch}")
        if len(tuple(self.hidden)) != 2:
            raise ValueError(f"hidden must hold two sizes (the MLP's two hidden layers); got {self.hidden}")
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))  # a TOML list → tuple
        if self.centres_per_epoch is not None and self.centres_per_epoch < 1:
            raise ValueError(
                f"centres_per_epoch must be >= 1 (or unset: every user); got {self.centres_per_epoch}"
            )
        if not 0.0 < self.public_ratio <= 1.0:
            raise ValueError(f"public_ratio must be in (0, 1]; got {self.public_ratio}")
        self.local_model  # noqa: B018  (the model's own checks)

    @property
    def local_model(self) -> ModelConfig:
        """The local model's shape and switches."""
        return ModelConfig(**{k: getattr(self, k) for k in _MODEL_FIELDS})

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> DGRECSettings:
        """A configuration's ``[protocol]`` values on top of their ``variant``'s (:meth:`for_variant`)."""
        given = {k: v for k, v in values.items() if k != "variant"}
        return cls.for_variant(str(values.get("variant", "dgrec")), **given)

    @classmethod
    def for_variant(cls, variant: str, **given: Any) -> DGRECSettings:
        """The settings of ``variant`` (:data:`VARIANTS`), with ``given`` values winning over its own.

        Raises:
            ValueError: an unknown variant or field, or a value the checks refuse.
        """
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}; got {variant!r}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ValueError(f"unknown DGREC setting(s) {unknown}; valid: {', '.join(sorted(known))}")
        return cls(**{**VARIANTS[variant], **given, "variant": variant})
