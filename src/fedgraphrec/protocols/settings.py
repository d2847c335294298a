"""The base of every protocol's settings and the groups of fields several protocols share.

Each registered protocol (:mod:`fedgraphrec.protocols.registry`) owns one frozen settings dataclass
holding all of its hyper-parameters, model ones included; it is the ``[protocol]`` table of a run's
TOML file, ``fedgraphrec train PROTOCOL --help`` and the settings table of its guide page. A class
inherits the groups it uses instead of repeating their fields, defaults and checks:

* :class:`ProtocolSettings` — the base: the fields a run fills in (``seed``, ``crypto``,
  ``reproducible``; :data:`RUN`), which are not settings of the protocol;
* :class:`ModelSettings` — the backbone and its initial tables (``model``, ``dim``, ``init_std``,
  ``secure_init``);
* :class:`MinibatchSettings` — the protocols trained on minibatches of BPR triples (``lr``, ``reg``,
  ``batch_size``, ``sampler``);
* :class:`RoundSampling` — the round-based protocols that sample ``S`` users per round from
  FedGRec's public stream and train them locally (FedGRec, FedNCF, FedPerGNN);
* :class:`SecureSumSettings` — the protocols whose server learns only secure sums (FedGRec, FedMF,
  FedNCF, P-GCN): the fixed-point resolution and the secure-aggregation threshold.

Each class documents every field of its own in an ``Attributes:`` docstring section (the settings
tables read them, :func:`settings_docs`); a field documented there overrides the group's line, since
the meaning of ``lr`` or ``reg`` differs a little between protocols.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from fedgraphrec.protocols.secagg.policy import MIN_CLIENTS, check_threshold
from fedgraphrec.seeding import secure_draws

__all__ = [
    "HIDING",
    "RUN",
    "Architecture",
    "MinibatchSettings",
    "ModelSettings",
    "ProtocolSettings",
    "RoundSampling",
    "SecureSumSettings",
    "settings_docs",
    "settings_fields",
    "settings_rows",
]

RUN = {"run": True}
"""Field metadata: the run configuration fills this field (``seed``, ``crypto``, ...), not ``[protocol]``."""
HIDING = {"hiding": True}
"""Field metadata: a per-feature override of ``reproducible`` (``None``: follow it), resolved per run."""
COVER = {"run": True, "cover": True}
"""Field metadata: whether the protocol's cover draws come from the CSPRNG, derived from the run."""


@dataclass(frozen=True)
class ProtocolSettings:
    """The base of every protocol's settings: what the run configuration fills in.

    Attributes:
        seed: the run seed (public streams); from the run's ``seed``.
        crypto: the node's own crypto mode, ``real`` or ``accounted``; from the run's ``crypto``.
        reproducible: the run's switch for hiding draws (:func:`~fedgraphrec.seeding.secure_draws`);
            from the run's ``reproducible``.
    """

    ALIASES: ClassVar[dict[str, str]] = {}
    """Other names a configuration may use for a field (FedGRec's ``n_layers`` for ``K``)."""

    seed: int = field(default=2020, metadata=RUN)
    crypto: str = field(default="accounted", metadata=RUN)
    reproducible: bool | None = field(default=None, metadata=RUN)

    def __post_init__(self) -> None:
        if self.crypto not in ("real", "accounted"):
            raise ValueError(f"crypto must be 'real' or 'accounted', got {self.crypto!r}")

    @property
    def real(self) -> bool:
        """Whether keys, tokens and protected payloads are computed for real."""
        return self.crypto == "real"

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Self:
        """The settings of a configuration's ``[protocol]`` values (a subclass may derive defaults)."""
        return cls(**values)

    def for_run(self, seed: int, crypto: str, reproducible: bool | None) -> Self:
        """These settings with the run's fields filled in (:data:`RUN`)."""
        return dataclasses.replace(self, seed=seed, crypto=crypto, reproducible=reproducible)

    def resolved(self) -> Self:
        """The settings the programs run with: every :data:`HIDING` override and cover flag decided.

        An unset override follows the run-level rule of :func:`~fedgraphrec.seeding.secure_draws`
        (``--crypto real`` hides unless ``reproducible``); a cover flag always does.
        """
        values: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.metadata.get("hiding"):
                values[f.name] = secure_draws(self, f.name)
            elif f.metadata.get("cover"):
                values[f.name] = secure_draws(self)
        return dataclasses.replace(self, **values)


def settings_fields(cls: type[ProtocolSettings]) -> list[dataclasses.Field[Any]]:
    """The fields of ``cls`` a configuration sets (every field but the run's, :data:`RUN`).

    In reading order: the backbone, the training schedule, the protocol's own, the secure sum.
    """
    groups = [ModelSettings, MinibatchSettings, RoundSampling, None, SecureSumSettings]

    def rank(f: dataclasses.Field[Any]) -> int:
        for i, group in enumerate(groups):
            if group is not None and issubclass(cls, group) and f.name in group.__dataclass_fields__:
                return i
        return groups.index(None)

    fields = [f for f in dataclasses.fields(cls) if not f.metadata.get("run")]
    return sorted(fields, key=rank)  # stable: declaration order within a group


def settings_docs(cls: type) -> dict[str, str]:
    """``name -> description`` from the ``Attributes:`` sections of ``cls`` and its bases (own wins)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        docs.update(_attribute_section(klass.__doc__ or ""))
    return docs


def settings_rows(cls: type[ProtocolSettings]) -> list[tuple[str, str, str, str]]:
    """``(name, type, default, description)`` of every setting of ``cls`` (help and docs tables).

    Aliases are named in the description (FedGRec's ``K``: "alias ``n_layers``").
    """
    docs = settings_docs(cls)
    aliases: dict[str, list[str]] = {}
    for alias, target in cls.ALIASES.items():
        aliases.setdefault(target, []).append(alias)
    rows = []
    for f in settings_fields(cls):
        default = f.default
        kind = str(f.type).replace("typing.", "")
        text = " ".join(docs.get(f.name, "").split())
        if f.name in aliases:
            text += f" (alias: {', '.join(aliases[f.name])})"
        shown = "unset" if default is None else repr(list(default) if isinstance(default, tuple) else default)
        rows.append((f.name, kind, shown, text))
    return rows


def _attribute_section(doc: str) -> dict[str, str]:
    out: dict[str, str] = {}
    section, name, indent = False, "", 0
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in ("Attributes:", "Args:"):
            section, indent = True, len(line) - len(line.lstrip())
            continue
        if not section:
            continue
        if stripped and len(line) - len(line.lstrip()) <= indent:
            section = False  # the next section
            continue
        head, sep, rest = stripped.partition(": ")
        if sep and head.isidentifier() and len(line) - len(line.lstrip()) == indent + 4:
            name = head
            out[name] = rest
        elif name and stripped:
            out[name] += " " + stripped
    return out


@dataclass(frozen=True)
class Architecture:
    """What the model factory needs to build a protocol's backbone and draw its initial tables."""

    model: str
    dim: int
    init_std: float
    n_layers: int = 0
    hidden: tuple[int, ...] = ()


@dataclass(frozen=True)
class ModelSettings(ProtocolSettings):
    """The backbone and its initial tables.

    Attributes:
        model: the backbone.
        dim: embedding size ``d``.
        init_std: std of the N(0, σ²) initial tables (LightGCN code 0.1; LP-GCN scripts 1.0).
        secure_init: override of ``reproducible`` for the initial embedding tables (unset: follow
            it). Secure tables come from an ``os.urandom``-keyed ChaCha20 stream (LP-GCN's server
            sees plaintext item rows: with seeded tables it could regenerate them and match rows to
            learn the item id behind every token); the oracle starts from the same tables.
    """

    MODELS: ClassVar[tuple[str, ...]] = ("lightgcn",)
    """The backbones this protocol runs (the first is ``model``'s default)."""

    model: str = "lightgcn"
    dim: int = 64
    init_std: float = 0.1
    secure_init: bool | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model not in self.MODELS:
            raise ValueError(f"model must be one of {', '.join(self.MODELS)}; got {self.model!r}")
        if self.dim <= 0:
            raise ValueError(f"dim must be positive; got {self.dim}")
        if self.init_std <= 0:
            raise ValueError(f"init_std must be positive; got {self.init_std}")

    def architecture(self) -> Architecture:
        """The backbone to build (a protocol with layers or an MLP adds them)."""
        return Architecture(self.model, self.dim, self.init_std, getattr(self, "n_layers", 0))


@dataclass(frozen=True)
class MinibatchSettings(ProtocolSettings):
    """Training on minibatches of BPR triples (one federated step per minibatch).

    Attributes:
        lr: Adam learning rate.
        reg: λ of the layer-0 L2 term (LightGCN's ``decay``).
        batch_size: triples per minibatch.
        sampler: ``interactions`` (each train pair once per epoch) or ``users`` (LightGCN's scheme).
    """

    lr: float = 1e-3
    reg: float = 1e-4
    batch_size: int = 2048
    sampler: str = "interactions"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.lr <= 0:
            raise ValueError(f"lr must be positive; got {self.lr}")
        if self.reg < 0:
            raise ValueError(f"reg must be >= 0; got {self.reg}")
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be positive; got {self.batch_size}")
        if self.sampler not in ("interactions", "users"):
            raise ValueError(f"sampler must be 'interactions' or 'users'; got {self.sampler!r}")


@dataclass(frozen=True)
class RoundSampling(ProtocolSettings):
    """Users sampled per round and their local training.

    Attributes:
        clients_per_round: ``S``, users sampled per round (without replacement; one round = one epoch).
        local_steps: ``τ``, local Adam steps per round.
        n_negatives: negatives each sampled user queries per round.
        lr: local Adam learning rate.
        reg: L2 weight of the local loss.
    """

    clients_per_round: int = 400
    local_steps: int = 10
    n_negatives: int = 2048
    lr: float = 1e-3
    reg: float = 1e-4

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("clients_per_round", "local_steps", "n_negatives", "lr"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.reg < 0:
            raise ValueError(f"reg must be >= 0, got {self.reg}")


@dataclass(frozen=True)
class SecureSumSettings(ProtocolSettings):
    """How the users' uploads are summed securely.

    Attributes:
        frac_bits: fixed-point fractional bits of the secure sum.
        secagg_threshold: fraction of a sum's users secure aggregation needs at every stage
            (``t = ceil(fraction · n)``); must exceed 0.5 (t > n/2, safe against a malicious
            server; tolerates n - t dropouts; see
            :func:`~fedgraphrec.protocols.secagg.policy.check_threshold`).
        secagg_semi_honest: accept a threshold <= 0.5 (honest-but-curious server only).
        secagg_min_clients: the fewest clients a secure sum may have; a client refuses a request
            (or a roster) with fewer. The default 3 is the smallest sum in which no single other
            participant learns an input by subtracting its own.

    These are the client's own requirements: a client holds every secure-aggregation request to
    them (:mod:`fedgraphrec.protocols.secagg.policy`), whatever threshold the server asks for; in
    ``crypto = "real"`` a node refuses a secure sum the server asks to run ``accounted`` or marks
    unprotected (:class:`~fedgraphrec.protocols.secagg.expect.CheckedSecureSumClient`).
    """

    frac_bits: int = 32
    secagg_threshold: float = 0.6
    secagg_semi_honest: bool = False
    secagg_min_clients: int = MIN_CLIENTS

    def __post_init__(self) -> None:
        super().__post_init__()
        check_threshold(self.secagg_threshold, self.secagg_semi_honest)
        if self.secagg_min_clients < 1:
            raise ValueError(f"secagg_min_clients must be >= 1, got {self.secagg_min_clients}")
        if not 8 <= self.frac_bits <= 48:
            raise ValueError(f"frac_bits must be in [8, 48], got {self.frac_bits}")
