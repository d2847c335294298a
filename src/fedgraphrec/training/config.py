"""Run configuration: the run-level fields, the evaluation, and the protocol's own settings object.

Every value a run depends on lives here, and the resolved configuration is written to the run
folder (``config.toml``: run fields at the top, an ``[eval]`` table, a ``[protocol]`` table with
``name`` and the protocol's settings), so a run can be repeated (or resumed) from its folder alone.
The protocol's hyper-parameters are its settings dataclass (:mod:`fedgraphrec.protocols.registry`);
:mod:`.loading` reads files and ``--set`` overrides into this.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fedgraphrec.protocols.registry import ProtocolEntry, lookup
from fedgraphrec.protocols.settings import ProtocolSettings, settings_fields
from fedgraphrec.seeding import secure_draws

__all__ = ["ConfigError", "EvalSettings", "TrainConfig", "config_differences"]

G = TypeVar("G", bound=ProtocolSettings)


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message says where and why."""


SELECTIONS = ("valid", "last", "test")
RATING_METRICS = ("rmse", "mae")
"""Metrics of rating protocols (lower is better)."""


@dataclass
class EvalSettings:
    """How a run is evaluated and which epoch it reports (the ``[eval]`` table).

    Attributes:
        ks: cut-offs for the ranking metrics.
        metric: metric used for model selection and early stopping, e.g. ``recall@20``
            (rating protocols: ``rmse`` or ``mae``, lower is better). Empty (the default): the
            protocol's kind decides, ``recall@20`` for ranking protocols and ``rmse`` for rating ones.
        select: which epoch the summary reports: ``valid`` (best validation ``metric``; falls back
            to ``last`` without a validation split), ``last``, or ``test`` (best *test* ``metric``:
            the optimistic protocol of some published scripts, kept only to reproduce them).
        patience: evaluations without validation improvement before stopping (0: never stop early).
        eval_every: evaluate every this many epochs.
        eval_initial: also evaluate the untrained model (epoch 0).
        valid_fraction: per-user fraction of train carved into a validation split when the dataset
            has none (0 keeps all of train).
        log_every: write a metrics line every this many epochs (evaluated epochs always); round-based
            protocols run thousands of one-round epochs.
        device_profile: also measure what a device pays: replay the epochs of this many clients
            (sampled from the seed) one AEAD per message sent or received and one key derivation per
            rotating key, and report their per-device cost (``summary.json``'s
            ``communication.per_device``; :mod:`fedgraphrec.runtime.device_profile`). 0: off.
    """

    ks: list[int] = field(default_factory=lambda: [20])
    metric: str = ""
    select: str = "valid"
    patience: int = 0
    eval_every: int = 1
    eval_initial: bool = False
    valid_fraction: float = 0.0
    log_every: int = 1
    device_profile: int = 0

    def validate(self, kind: str = "ranking") -> None:
        """Check ranges and choices (``kind``: the protocol's, which decides the metrics)."""
        checks: list[tuple[bool, str]] = [
            (
                len(self.ks) > 0 and all(k > 0 for k in self.ks),
                f"ks must be positive integers; got {self.ks}",
            ),
            (
                self.select in SELECTIONS,
                f"select must be one of {', '.join(SELECTIONS)}; got {self.select!r}",
            ),
            (self.patience >= 0, f"patience must be >= 0; got {self.patience}"),
            (self.eval_every > 0, f"eval_every must be positive; got {self.eval_every}"),
            (
                0.0 <= self.valid_fraction < 1.0,
                f"valid_fraction must be in [0, 1); got {self.valid_fraction}",
            ),
            (self.log_every > 0, f"log_every must be positive; got {self.log_every}"),
            (self.device_profile >= 0, f"device_profile must be >= 0 (0: off); got {self.device_profile}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        if kind == "rating":
            if self.metric not in RATING_METRICS:
                raise ConfigError(f"metric of a rating protocol must be rmse or mae; got {self.metric!r}")
            return
        m = re.fullmatch(r"(precision|recall|ndcg|hit)@(\d+)", self.metric)
        if m is None:
            raise ConfigError(
                f"metric must look like 'recall@20' (precision/recall/ndcg/hit); got {self.metric!r}"
            )
        if int(m.group(2)) not in self.ks:
            raise ConfigError(f"metric {self.metric!r} needs K={m.group(2)} in ks={self.ks}")


@dataclass
class TrainConfig:
    """Everything a training run depends on: run-level fields, evaluation, the protocol's settings.

    Attributes:
        protocol: a registered protocol (``fedgraphrec.protocols.registry``): ``central`` (the
            oracle), ``lpgcn``, ``gnn4fr``, ``fedgrec``, ``federank``, ``fcf``, ``fedmf``,
            ``fedncf``, ``pgcn``, ``fedpergnn``.
        dataset: registered name (``fedgraphrec datasets``) or a folder path.
        dataset_options: loader options, e.g. ``{split = "u1", threshold = 4.0}``.
        data_dir: dataset root (overrides ``FEDGRAPHREC_DATA``).
        seed: the run seed; every random stream is a named child of it.
        epochs: maximum number of epochs.
        dtype: ``float32`` or ``float64``.
        crypto: ``real`` (every protected payload encrypted) or ``accounted`` (bytes counted as if).
        reproducible: draw every *hiding* value (initial tables, virtual items and their cover
            gradients, negatives, pseudo items, DP/LDP noise) from the run seed, so the run repeats bit
            for bit — and anyone with ``config.toml`` can regenerate them. Unset (the default): true
            under ``crypto = "accounted"``, false under ``crypto = "real"`` (every hiding draw from the
            OS CSPRNG; metrics then vary from run to run, ``--verify`` still holds).
            ``summary.json``'s ``randomness`` says which source each kind of draw used.
        verify: run the centralized oracle in lockstep and log the largest parameter deviation.
        transcripts: keep what each party received (for audits; memory-hungry on large data).
        threads: torch intra-op threads (0: leave torch's default).
        checkpoint_every: epochs between checkpoints (0: none).
        eval: the ``[eval]`` table (:class:`EvalSettings`).
        settings: the protocol's settings object (the ``[protocol]`` table; default: the protocol's
            defaults). Its run fields (``seed``, ``crypto``, ``reproducible``) follow this config.
    """

    protocol: str = "central"
    dataset: str = "synthetic"
    dataset_options: dict[str, Any] = field(default_factory=dict)
    data_dir: str = ""
    seed: int = 2020
    epochs: int = 100
    dtype: str = "float32"
    crypto: str = "accounted"
    reproducible: bool | None = None
    verify: bool = False
    transcripts: bool = False
    threads: int = 0
    checkpoint_every: int = 1
    eval: EvalSettings = field(default_factory=EvalSettings)
    settings: ProtocolSettings | None = None

    def __post_init__(self) -> None:
        entry = self.entry()
        if self.settings is None:
            self.settings = entry.settings()
        elif type(self.settings) is not entry.settings:
            raise ConfigError(
                f"settings: protocol {self.protocol} takes {entry.settings.__name__}, "
                f"got {type(self.settings).__name__}"
            )
        if not self.eval.metric:  # the kind's own: top-K for ranking protocols, RMSE for rating ones
            metric = "rmse" if entry.kind == "rating" else "recall@20"
            self.eval = dataclasses.replace(self.eval, metric=metric)
        self._bind()

    def entry(self) -> ProtocolEntry:
        """The protocol's registry entry."""
        try:
            return lookup(self.protocol)
        except KeyError as exc:
            raise ConfigError(str(exc.args[0])) from None

    def _bind(self) -> None:
        assert self.settings is not None
        try:
            settings = self.settings.for_run(self.seed, self.crypto, self.reproducible)
            # other run-bound fields a protocol's programs read (P4GCN's planned epochs, its patience)
            run = {"epochs": self.epochs, "patience": self.eval.patience}
            bound: dict[str, Any] = {
                f.name: run[f.name]
                for f in dataclasses.fields(settings)
                if f.metadata.get("run") and f.name in run and getattr(settings, f.name) != run[f.name]
            }
            self.settings = dataclasses.replace(settings, **bound) if bound else settings
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def settings_as(self, group: type[G]) -> G:
        """The settings as one of their groups (``MinibatchSettings``, ``ModelSettings``, ...).

        Raises:
            ConfigError: the protocol's settings are not of that group (e.g. a round-based protocol
                has no ``batch_size``).
        """
        if not isinstance(self.settings, group):
            raise ConfigError(f"protocol {self.protocol} has no {group.__name__} (its settings: "
                              f"{type(self.settings).__name__})")  # fmt: skip
        return self.settings

    @property
    def protocol_settings(self) -> ProtocolSettings:
        """The settings object (never ``None`` after construction)."""
        assert self.settings is not None
        return self.settings

    def program_settings(self) -> Any:
        """What the protocol's programs run with: the settings bound to this run, overrides decided."""
        self._bind()
        return self.protocol_settings.resolved()

    def validate(self) -> None:
        """Check ranges and choices; raise :class:`ConfigError` naming the parameter."""
        entry = self.entry()
        checks: list[tuple[bool, str]] = [
            (
                self.crypto in ("real", "accounted"),
                f"crypto must be 'real' or 'accounted'; got {self.crypto!r}",
            ),
            (self.epochs >= 1, f"epochs must be >= 1; got {self.epochs}"),
            (self.seed >= 0, f"seed must be >= 0; got {self.seed}"),
            (
                self.dtype in ("float32", "float64"),
                f"dtype must be 'float32' or 'float64'; got {self.dtype!r}",
            ),
            (self.checkpoint_every >= 0, f"checkpoint_every must be >= 0; got {self.checkpoint_every}"),
            (self.threads >= 0, f"threads must be >= 0; got {self.threads}"),
            (
                not (self.eval.device_profile and self.protocol == "central"),
                "device_profile: protocol central sends no messages; there is no device to replay",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        self.eval.validate(entry.kind)
        self._bind()
        device = getattr(self.settings, "device", "cpu")
        if device != "cpu":
            if self.protocol != "fedgrec":
                raise ConfigError(
                    f"device={device!r}: only fedgrec runs off the CPU so far; use device='cpu'"
                )
            import torch

            if not torch.cuda.is_available():
                raise ConfigError(f"device={device!r} but this machine has no CUDA device")

    def randomness(self) -> dict[str, Any]:
        """Where this run's hiding draws come from (``summary.json``'s ``randomness``).

        ``init``, ``cover`` (virtual items, cover gradients, negatives, pseudo items) and ``noise``
        (DP/LDP) are each ``"csprng"`` or ``"seed"`` (:func:`~fedgraphrec.seeding.secure_draws`);
        ``seeded_overrides`` names the per-feature flags that ask for seeded draws although the
        run-level rule would hide them (``--crypto real``), so such a run says so.
        """
        s = self.protocol_settings
        reproducible = not secure_draws(self)
        sources = {
            "init": secure_draws(s, "secure_init"),
            "cover": secure_draws(s, "secure_virtual_items"),
            "noise": secure_draws(s, "secure_noise"),
        }
        flags = ("secure_init", "secure_virtual_items", "secure_noise")
        return {
            "reproducible": reproducible,
            **{k: "csprng" if v else "seed" for k, v in sources.items()},
            "seeded_overrides": [f for f in flags if getattr(s, f, None) is False and not reproducible],
        }

    def to_dict(self) -> dict[str, Any]:
        """The TOML layout as a plain dict: run fields, ``eval``, ``protocol`` (``name`` + settings).

        TOML/JSON serialisable; unset optional values are left out (TOML has no null), tuples are
        lists. :func:`~fedgraphrec.training.loading.config_from_dict` reads it back identically.
        """
        run = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("protocol", "eval", "settings")
        }
        settings = {
            f.name: list(v) if isinstance(v := getattr(self.settings, f.name), tuple) else v
            for f in settings_fields(type(self.protocol_settings))
        }
        out: dict[str, Any] = {
            **{k: v for k, v in run.items() if v is not None},
            "eval": dataclasses.asdict(self.eval),
            "protocol": {"name": self.protocol, **{k: v for k, v in settings.items() if v is not None}},
        }
        out["dataset_options"] = dict(self.dataset_options)
        return out


def config_differences(
    ours: dict[str, Any], theirs: dict[str, Any], prefix: str = ""
) -> list[tuple[str, Any, Any]]:
    """Where two configurations in :meth:`TrainConfig.to_dict`'s layout differ, by dotted key.

    Returns ``(key, ours, theirs)`` sorted by key (``protocol.alpha``, ``eval.ks``,
    ``dataset_options.split``, ``seed``); a key one side lacks has the value ``None`` there. Used to
    say which values a resume disagrees with instead of "a different config".
    """
    found: list[tuple[str, Any, Any]] = []
    for key in sorted(set(ours) | set(theirs)):
        a, b = ours.get(key), theirs.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += config_differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append((f"{prefix}{key}", a, b))
    return found
