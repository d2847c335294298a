"""Rating training (P4GCN and its Table 1/2 baselines): one method, one seed, RMSE/MAE on the test split.

Methods (spec §7.5, all with the shared decoder ``σ`` over the dataset's rating range, A5):
``pmf``, ``neumf``, ``gcn``, ``lightgcn``, ``fesog-`` (FeSoG without its social module; all local,
ratings only), ``sesorec`` (social-regularised MF; the secret-shared products of SeSoRec/S3Rec
compute the same numbers, so accuracy is simulated in plaintext and S3Rec's row equals it),
``p4gcn`` (DP on, plain HE backend), ``p4gcn*`` (no noise), and ``p4gcn-pmf``/``p4gcn-gcn`` (+DP)
with ``*`` variants for Table 2. ``backend = "ckks-packed"`` runs the P4GCN methods on real packed
CKKS instead of the float64 simulation (``paillier``/``ckks`` also exist but are far too slow for
whole epochs).

Model selection: the epoch with the best validation RMSE (P4GCN evaluates with the social rows it
last decrypted, free post-processing; the accountant already counts one extra release), with early
stopping after ``patience`` epochs without improvement; P4GCN's ``K`` and noise are calibrated to
the full planned schedule of ``epochs``, so stopping early only spends less budget. Datasets
without a validation split (Douban) hold out a seeded 10 % of train.

Every setting is a field of :class:`RatingSettings` (TOML and ``--set``). One run with a run folder:
``fedgraphrec train p4gcn --dataset filmtrust --set method=p4gcn``; the paper tables:
``fedgraphrec reproduce p4gcn-t1-filmtrust``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.he import BACKENDS, HEBackend, PlainBackend, make_backend
from fedgraphrec.data.types import Ratings, SocialGraph
from fedgraphrec.evaluation.rating import mae, rmse
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.models.rating import Backbone, FeSoGItem, NeuMF, decode
from fedgraphrec.protocols.p4gcn import P4GCN, P4GCNConfig
from fedgraphrec.seeding import secure_draws, seeded_generator

__all__ = [
    "EPS",
    "METHODS",
    "RatingSettings",
    "rating_splits",
    "run_method",
    "shuffled_social",
    "train_rating",
]

LOCAL = ("pmf", "neumf", "gcn", "lightgcn", "sesorec", "fesog-")
P4 = ("p4gcn", "p4gcn*", "p4gcn-pmf", "p4gcn-pmf*", "p4gcn-gcn", "p4gcn-gcn*")
METHODS = LOCAL + P4
EPS = {"filmtrust": 15.0, "ciao": 10.0, "douban": 10.0, "epinions": 3.0}

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class RatingSettings:
    """Everything a rating run takes (defaults: the P4GCN spec's, d = 64, Adam lr 1e-3, batch 256).

    Attributes:
        method: one of :data:`METHODS`.
        dim, layers: embedding size and backbone layers.
        lr, batch, epochs, patience: Adam learning rate, batch size, epochs, early-stopping patience.
        beta, social_lr, clip: P4GCN's fusion weight, social-table step η and clipping constant C.
        social_reg: SeSoRec's λ on ‖u_i − u_f‖².
        eps: P4GCN's ε (None: the paper's value for the dataset, :data:`EPS`, else 10); δ = 1e-4.
        fusion: P4GCN's fusion layer (False: Fig. 4's plain average).
        backend: HE backend of the P4GCN methods (``plain`` simulates Paillier-2048 byte counts).
        social: ``real``, or ``shuffled`` (a control: user ids of the social graph permuted).
        sensitivity: ``global`` (a DP guarantee) or ``paper-local`` (the paper's; not a guarantee).
        reproducible: draw P4GCN's hiding values (the social party's ``W1``, the DP noise) from the
            run seed, so the run repeats bit for bit and anyone with the seed regenerates them. Unset:
            true with the ``plain`` backend (simulated HE: P4GCN's accounted mode), false with a real HE
            backend (its real mode), whose runs draw them from the OS CSPRNG.
        secure_noise: override of ``reproducible`` for the DP noise (unset: follow it).
    """

    method: str = "p4gcn"
    dim: int = 64
    layers: int = 2
    lr: float = 1e-3
    batch: int = 256
    epochs: int = 30
    patience: int = 5
    beta: float = 1.0
    social_lr: float = 1.0
    social_reg: float = 1e-2
    clip: float = 0.1
    eps: float | None = None
    fusion: bool = True
    backend: str = "plain"
    social: str = "real"
    sensitivity: str = "global"
    reproducible: bool | None = None
    secure_noise: bool | None = None

    def __post_init__(self) -> None:
        checks = [
            (self.method in METHODS, f"method must be one of {', '.join(METHODS)}; got {self.method!r}"),
            (self.backend in BACKENDS, f"backend must be one of {', '.join(BACKENDS)}; got {self.backend!r}"),
            (
                self.social in ("real", "shuffled"),
                f"social must be 'real' or 'shuffled'; got {self.social!r}",
            ),
            (
                self.sensitivity in ("global", "paper-local"),
                f"sensitivity must be 'global' or 'paper-local'; got {self.sensitivity!r}",
            ),
            (
                min(self.dim, self.batch, self.epochs, self.patience) >= 1,
                "dim, batch, epochs, patience must be >= 1",
            ),
            (self.lr > 0 and self.clip > 0, f"lr and clip must be > 0; got lr={self.lr}, clip={self.clip}"),
            (self.eps is None or self.eps > 0, f"eps must be > 0; got {self.eps}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def hides(self, override: str | None = None) -> bool:
        """Whether a P4GCN hiding draw comes from the CSPRNG (``override``: ``secure_noise``).

        :func:`~fedgraphrec.seeding.secure_draws` with a real HE backend as P4GCN's ``crypto = "real"``.
        """
        mode = "accounted" if self.backend == "plain" else "real"
        view = SimpleNamespace(reproducible=self.reproducible, crypto=mode, secure_noise=self.secure_noise)
        return secure_draws(view, override)


def rating_splits(data: Ratings, seed: int) -> tuple[Arrays, Arrays, Arrays]:
    """(train, valid, test) arrays; without a validation split, a seeded 10 % of train is held out."""

    def arr(s: Any) -> Arrays:
        return np.array(s.users), np.array(s.items), np.array(s.ratings, dtype=np.float64)

    train, test = arr(data.train), arr(data.test)
    if data.valid is not None:
        return train, arr(data.valid), test
    rng = np.random.default_rng([seed, 7])
    perm = rng.permutation(len(train[0]))
    n_val = len(perm) // 10
    val_idx, tr_idx = perm[:n_val], perm[n_val:]
    return tuple(a[tr_idx] for a in train), tuple(a[val_idx] for a in train), test  # type: ignore[return-value]


def _graph(train: Arrays, n_users: int, n_items: int) -> NormalizedBipartite:
    m = sp.csr_matrix((np.ones(len(train[0])), (train[0], train[1])), shape=(n_users, n_items))
    m.data[:] = 1.0
    return NormalizedBipartite.from_train(m, dtype=torch.float32)


def _metrics(pred: np.ndarray, truth: np.ndarray, rng_: tuple[float, float]) -> tuple[float, float]:
    return rmse(pred, truth, clip=rng_), mae(pred, truth, clip=rng_)


def _fit(
    epochs: int,
    run_epoch: Callable[[int], float],
    predict: Callable[[np.ndarray, np.ndarray], np.ndarray],
    val: Arrays,
    test: Arrays,
    rng_: tuple[float, float],
    patience: int,
) -> dict[str, Any]:
    best: dict[str, Any] = {"val_rmse": float("inf")}
    curve = []
    bad = 0
    for e in range(epochs):
        loss = run_epoch(e)
        v_rmse, v_mae = _metrics(predict(val[0], val[1]), val[2], rng_)
        curve.append({"epoch": e + 1, "loss": loss, "val_rmse": v_rmse, "val_mae": v_mae})
        if v_rmse < best["val_rmse"]:
            t_rmse, t_mae = _metrics(predict(test[0], test[1]), test[2], rng_)
            best = {"val_rmse": v_rmse, "test_rmse": t_rmse, "test_mae": t_mae, "epoch": e + 1}
            bad = 0
        else:
            bad += 1
            if bad >= patience:
                break
    return {**best, "curve": curve}


def _local(
    method: str, data: Ratings, tr: Arrays, val: Arrays, te: Arrays, seed: int, s: RatingSettings
) -> dict[str, Any]:
    gen = seeded_generator(seed)
    rng_ = data.rating_range
    lo, hi = rng_
    model: torch.nn.Module
    if method == "neumf":
        model = NeuMF(data.n_users, data.n_items, s.dim, gen)
    elif method == "fesog-":
        model = FeSoGItem(data.n_users, data.n_items, tr[0], tr[1], s.dim, gen)
    else:
        kind = {"pmf": "pmf", "sesorec": "pmf", "gcn": "gcn", "lightgcn": "lightgcn"}[method]
        model = Backbone(kind, _graph(tr, data.n_users, data.n_items), s.dim, s.layers, gen)
    opt = torch.optim.Adam(model.parameters(), lr=s.lr)
    social = None
    if method == "sesorec":
        assert data.social is not None
        social = sp.csr_matrix(data.social.adjacency(symmetric=True), dtype=np.float32)
    order_rng = np.random.default_rng([seed, 11])
    t_u, t_i, t_r = (torch.from_numpy(a) for a in tr)

    def scores(users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        if isinstance(model, NeuMF):
            return model(users, items, lo, hi)
        u, v = model()
        return decode(u[users], v[items], lo, hi)

    def run_epoch(_: int) -> float:
        perm = torch.from_numpy(order_rng.permutation(len(t_u)))
        losses = []
        for k in range(0, len(perm), s.batch):
            b = perm[k : k + s.batch]
            loss = ((scores(t_u[b], t_i[b]) - t_r[b].float()) ** 2).mean()
            if social is not None and isinstance(model, Backbone):
                bu = np.unique(t_u[b].numpy())
                sub = social[bu].tocoo()
                if sub.nnz:
                    diff = model.user[torch.from_numpy(bu[sub.row])] - model.user[torch.from_numpy(sub.col)]
                    loss = loss + s.social_reg / 2 * (diff**2).sum() / len(b)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        return float(np.mean(losses))

    @torch.no_grad()
    def predict(u: np.ndarray, i: np.ndarray) -> np.ndarray:
        return scores(torch.from_numpy(u), torch.from_numpy(i)).double().numpy()

    return _fit(s.epochs, run_epoch, predict, val, te, rng_, s.patience)


def _backend(name: str, dim: int) -> HEBackend:
    """The HE backend of a P4GCN run (``plain`` simulates Paillier-2048 byte counts)."""
    if name == "plain":
        return PlainBackend(2048)
    if name == "ckks-packed":
        return make_backend(name, dim=dim)
    return make_backend(name)


def _p4(
    method: str, data: Ratings, tr: Arrays, val: Arrays, te: Arrays, seed: int, s: RatingSettings
) -> dict[str, Any]:
    assert data.social is not None
    backbone = {"p4gcn": "lightgcn", "p4gcn-pmf": "pmf", "p4gcn-gcn": "gcn"}[method.rstrip("*")]
    cfg = P4GCNConfig(
        dim=s.dim, backbone=backbone, n_layers=s.layers, beta=s.beta, lr=s.lr,
        social_lr=s.social_lr, clip=s.clip, eps=s.eps or EPS.get(data.name, 10.0),
        noise=not method.endswith("*"), batch_size=s.batch, epochs=s.epochs,
        fusion=s.fusion, sensitivity=s.sensitivity, secure_noise=s.hides("secure_noise"),
        secure_weights=s.hides(),
    )  # fmt: skip
    adj = data.social.adjacency(symmetric=True)
    t0 = time.perf_counter()
    backend = _backend(s.backend, s.dim)
    proto = P4GCN(tr, data.n_users, data.n_items, adj, cfg, backend, data.rating_range, seed=seed)
    setup_s = time.perf_counter() - t0
    epoch_s: list[float] = []

    def run_epoch(e: int) -> float:
        t = time.perf_counter()
        loss = proto.run_epoch(e)
        epoch_s.append(time.perf_counter() - t)
        return loss

    out = _fit(s.epochs, run_epoch, proto.predict, val, te, data.rating_range, s.patience)
    out["backend"] = backend.name
    out["setup_seconds"] = setup_s
    out["epoch_seconds"] = epoch_s
    out["privacy"] = proto.privacy()
    out["randomness"] = {
        "reproducible": not s.hides(),
        "weights": "csprng" if cfg.secure_weights else "seed",
        "noise": "csprng" if cfg.secure_noise else "seed",
    }
    out["releases_K"] = proto.releases
    out["epsilon_spent"] = out["privacy"]["epsilon_spent"] or 0.0
    out["eps_target"] = cfg.eps
    out["cipher_GB"] = proto.net.ledger.total_bytes() / 1e9
    sig = proto.p2.sigma * proto.p1.unscale
    out["mean_noise_row_norm"] = float(np.mean(sig) * np.sqrt(cfg.dim))
    out["mean_signal_row_norm"] = float(np.mean(np.linalg.norm(proto.p1.y_cache, axis=1)))
    return out


def run_method(method: str, data: Ratings, seed: int, s: RatingSettings) -> dict[str, Any]:
    """Train one method with one seed; returns best-validation test metrics and the curve."""
    tr, val, te = rating_splits(data, seed)
    t0 = time.perf_counter()
    res = (_p4 if method in P4 else _local)(method, data, tr, val, te, seed, s)
    res["seconds"] = time.perf_counter() - t0
    return res


def shuffled_social(data: Ratings, seed: int) -> Ratings:
    """``data`` with its social graph's user ids permuted: the control for "does P4GCN use the links?".

    Degrees, link count and the graph's shape stay; who is linked to whom no longer matches the
    ratings. A P4GCN run that is as accurate on this graph gains nothing from the real one.
    """
    if data.social is None:
        raise ValueError(f"dataset {data.name!r} has no social graph to shuffle")
    perm = np.random.default_rng(seed).permutation(data.n_users)
    s = data.social
    return dataclasses.replace(data, social=SocialGraph(s.n_users, perm[s.src], perm[s.dst], s.directed))


def train_rating(data: Ratings, seed: int, s: RatingSettings, run_dir: str | Path) -> dict[str, Any]:
    """One method and seed on ``data``, written as a standard run folder; returns ``summary.json``'s dict."""
    from fedgraphrec.training.rundir import write_run

    if s.social == "shuffled":
        data = shuffled_social(data, seed=12345)
    res = run_method(s.method, data, seed, s)
    records = [
        {"epoch": r["epoch"], "loss": r["loss"], "valid": {"rmse": r["val_rmse"], "mae": r["val_mae"]}}
        for r in res["curve"]
    ]
    summary: dict[str, Any] = {
        "protocol": "p4gcn",
        "method": s.method,
        "dataset": data.name,
        "seed": seed,
        "selection": "best validation RMSE",
        "selected_epoch": res.get("epoch"),
        "test": {"rmse": res.get("test_rmse"), "mae": res.get("test_mae")},
        "valid": {"rmse": res.get("val_rmse")},
        "train_seconds": res["seconds"],
        **{k: res[k] for k in ("privacy", "backend", "cipher_GB", "releases_K") if k in res},
    }
    config = {"protocol": "p4gcn", "dataset": data.name, "seed": seed, **dataclasses.asdict(s)}
    write_run(run_dir, config, records, summary, f"{s.method} on {data.name}")
    return summary
