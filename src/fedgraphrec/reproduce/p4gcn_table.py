"""Table 1/2 of P4GCN: rating methods on one dataset, several seeds, RMSE/MAE on the test split.

Methods (spec §7.5, all with the shared decoder ``σ`` over the dataset's rating range, A5):
``pmf``, ``neumf``, ``gcn``, ``lightgcn``, ``fesog-`` (FeSoG without its social module; all local,
ratings only), ``sesorec`` (social-regularised MF; the secret-shared products of SeSoRec/S3Rec
compute the same numbers, so accuracy is simulated in plaintext and S3Rec's row equals it),
``p4gcn`` (DP on, plain HE backend), ``p4gcn*`` (no noise), and ``p4gcn-pmf``/``p4gcn-gcn`` (+DP)
with ``*`` variants for Table 2. ``--backend ckks-packed`` runs the P4GCN methods on real packed
CKKS instead of the float64 simulation (``paillier``/``ckks`` also exist but are far too slow for
whole epochs).

Model selection: the epoch with the best validation RMSE (P4GCN evaluates with the social rows it
last decrypted, free post-processing; the accountant already counts one extra release), with early
stopping after ``--patience`` epochs without improvement; P4GCN's ``K`` and noise are calibrated to
the full planned schedule of ``--epochs``, so stopping early only spends less budget. Datasets
without a validation split (Douban) hold out a seeded 10 % of train.

Run: ``python -m fedgraphrec.reproduce.p4gcn_table --dataset filmtrust --seeds 0 1 2 --out DIR``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.he import BACKENDS, HEBackend, PlainBackend, make_backend
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.types import Ratings, SocialGraph
from fedgraphrec.evaluation.rating import mae, rmse
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.models.rating import Backbone, FeSoGItem, NeuMF, decode
from fedgraphrec.protocols.p4gcn import P4GCN, P4GCNConfig
from fedgraphrec.seeding import seeded_generator

__all__ = ["METHODS", "main", "run_method", "shuffled_social"]

LOCAL = ("pmf", "neumf", "gcn", "lightgcn", "sesorec", "fesog-")
P4 = ("p4gcn", "p4gcn*", "p4gcn-pmf", "p4gcn-pmf*", "p4gcn-gcn", "p4gcn-gcn*")
METHODS = LOCAL + P4
EPS = {"filmtrust": 15.0, "ciao": 10.0, "douban": 10.0, "epinions": 3.0}

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def _splits(data: Ratings, seed: int) -> tuple[Arrays, Arrays, Arrays]:
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
    method: str, data: Ratings, tr: Arrays, val: Arrays, te: Arrays, seed: int, args: argparse.Namespace
) -> dict[str, Any]:
    gen = seeded_generator(seed)
    rng_ = data.rating_range
    lo, hi = rng_
    model: torch.nn.Module
    if method == "neumf":
        model = NeuMF(data.n_users, data.n_items, args.dim, gen)
    elif method == "fesog-":
        model = FeSoGItem(data.n_users, data.n_items, tr[0], tr[1], args.dim, gen)
    else:
        kind = {"pmf": "pmf", "sesorec": "pmf", "gcn": "gcn", "lightgcn": "lightgcn"}[method]
        model = Backbone(kind, _graph(tr, data.n_users, data.n_items), args.dim, args.layers, gen)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
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
        for k in range(0, len(perm), args.batch):
            b = perm[k : k + args.batch]
            loss = ((scores(t_u[b], t_i[b]) - t_r[b].float()) ** 2).mean()
            if social is not None and isinstance(model, Backbone):
                bu = np.unique(t_u[b].numpy())
                sub = social[bu].tocoo()
                if sub.nnz:
                    diff = model.user[torch.from_numpy(bu[sub.row])] - model.user[torch.from_numpy(sub.col)]
                    loss = loss + args.social_reg / 2 * (diff**2).sum() / len(b)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        return float(np.mean(losses))

    @torch.no_grad()
    def predict(u: np.ndarray, i: np.ndarray) -> np.ndarray:
        return scores(torch.from_numpy(u), torch.from_numpy(i)).double().numpy()

    return _fit(args.epochs, run_epoch, predict, val, te, rng_, args.patience)


def _backend(name: str, dim: int) -> HEBackend:
    """The HE backend of a P4GCN run (``plain`` simulates Paillier-2048 byte counts)."""
    if name == "plain":
        return PlainBackend(2048)
    if name == "ckks-packed":
        return make_backend(name, dim=dim)
    return make_backend(name)


def _p4(
    method: str, data: Ratings, tr: Arrays, val: Arrays, te: Arrays, seed: int, args: argparse.Namespace
) -> dict[str, Any]:
    assert data.social is not None
    backbone = {"p4gcn": "lightgcn", "p4gcn-pmf": "pmf", "p4gcn-gcn": "gcn"}[method.rstrip("*")]
    cfg = P4GCNConfig(
        dim=args.dim, backbone=backbone, n_layers=args.layers, beta=args.beta, lr=args.lr,
        social_lr=args.social_lr, clip=args.clip, eps=args.eps or EPS.get(data.name, 10.0),
        noise=not method.endswith("*"), batch_size=args.batch, epochs=args.epochs,
        fusion=not getattr(args, "no_fusion", False),
        sensitivity=getattr(args, "sensitivity", "global"), secure_noise=getattr(args, "secure_noise", False),
    )  # fmt: skip
    adj = data.social.adjacency(symmetric=True)
    t0 = time.perf_counter()
    backend = _backend(getattr(args, "backend", "plain"), args.dim)
    proto = P4GCN(tr, data.n_users, data.n_items, adj, cfg, backend, data.rating_range, seed=seed)
    setup_s = time.perf_counter() - t0
    epoch_s: list[float] = []

    def run_epoch(e: int) -> float:
        t = time.perf_counter()
        loss = proto.run_epoch(e)
        epoch_s.append(time.perf_counter() - t)
        return loss

    out = _fit(args.epochs, run_epoch, proto.predict, val, te, data.rating_range, args.patience)
    out["backend"] = backend.name
    out["setup_seconds"] = setup_s
    out["epoch_seconds"] = epoch_s
    out["privacy"] = proto.privacy()
    out["releases_K"] = proto.releases
    out["epsilon_spent"] = out["privacy"]["epsilon_spent"] or 0.0
    out["eps_target"] = cfg.eps
    out["cipher_GB"] = proto.net.ledger.total_bytes() / 1e9
    sig = proto.p2.sigma * proto.p1.unscale
    out["mean_noise_row_norm"] = float(np.mean(sig) * np.sqrt(cfg.dim))
    out["mean_signal_row_norm"] = float(np.mean(np.linalg.norm(proto.p1.y_cache, axis=1)))
    return out


def run_method(method: str, data: Ratings, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Train one method with one seed; returns best-validation test metrics and the curve."""
    tr, val, te = _splits(data, seed)
    t0 = time.perf_counter()
    res = (_p4 if method in P4 else _local)(method, data, tr, val, te, seed, args)
    res["seconds"] = time.perf_counter() - t0
    return res


def shuffled_social(data: Ratings, seed: int) -> Ratings:
    """``data`` with its social graph's user ids permuted: the control for "does P4GCN use the links?".

    Degrees, link count and the graph's shape stay; who is linked to whom no longer matches the
    ratings. A P4GCN run that is as accurate on this graph gains nothing from the real one.
    """
    if data.social is None:
        raise SystemExit(f"dataset {data.name!r} has no social graph to shuffle")
    perm = np.random.default_rng(seed).permutation(data.n_users)
    s = data.social
    return dataclasses.replace(data, social=SocialGraph(s.n_users, perm[s.src], perm[s.dst], s.directed))


def main(argv: list[str] | None = None) -> None:
    """CLI entry: ``--dataset``, ``--methods``, ``--seeds``, hyper-parameters, ``--out``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--patience", type=int, default=5)
    p.add_argument("--beta", type=float, default=1.0)
    p.add_argument("--social-lr", type=float, default=1.0)
    p.add_argument("--social-reg", type=float, default=1e-2)
    p.add_argument("--clip", type=float, default=0.1)
    p.add_argument("--eps", type=float, default=None)
    p.add_argument(
        "--no-fusion", action="store_true",
        help="P4GCN without the fusion layer (Fig. 4's ablation: plain average with the β-scaled social row)",
    )  # fmt: skip
    p.add_argument(
        "--backend", default="plain", choices=BACKENDS,
        help="HE backend of the P4GCN methods (plain: float64 simulation; ckks-packed: real HE)",
    )  # fmt: skip
    p.add_argument(
        "--social", default="real", choices=("real", "shuffled"),
        help="shuffled: a control whose social graph has its user ids permuted (same structure, "
        "wrong people); run files get a '_shuffled' suffix",
    )  # fmt: skip
    p.add_argument(
        "--sensitivity", default="global", choices=("global", "paper-local"),
        help="global: noise from a data-independent bound, (eps, delta) is a DP guarantee; paper-local: "
        "the paper's per-user data-dependent sensitivity (reproduces its tables; NOT a DP guarantee)",
    )  # fmt: skip
    p.add_argument(
        "--secure-noise", action="store_true",
        help="draw the DP noise from the OS CSPRNG instead of the run seed (not reproducible bit for bit)",
    )  # fmt: skip
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    data = load_dataset(args.dataset)
    if not isinstance(data, Ratings):
        raise SystemExit(f"--dataset {args.dataset!r} has no explicit ratings")
    if args.social == "shuffled":
        data = shuffled_social(data, seed=12345)
    args.out.mkdir(parents=True, exist_ok=True)
    for method in args.methods:
        for seed in args.seeds:
            res = run_method(method, data, seed, args)
            res.update(method=method, seed=seed, dataset=args.dataset, batch=args.batch, lr=args.lr)
            name = method.replace("*", "_ideal") + ("_shuffled" if args.social == "shuffled" else "")
            res["social"] = args.social
            (args.out / f"{args.dataset}_{name}_s{seed}.json").write_text(json.dumps(res, indent=1))
            print(
                f"{args.dataset} {method} seed={seed} test RMSE={res['test_rmse']:.4f} "
                f"MAE={res['test_mae']:.4f} epoch={res['epoch']} ({res['seconds']:.0f}s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
