r"""One full P4GCN training epoch on FilmTrust with real packed CKKS, against the plain backend.

Both runs use the table runner's ``run_method`` with the Table 1 settings (LightGCN backbone, d = 64,
batch 256, Adam lr 5e-3, ε = 15) but a one-epoch schedule, the same seed and the same DP noise stream
(the social party draws its noise from its own seeded generator whatever the backend). The only
difference is the arithmetic of the two sandwiches: float64 (``plain``) or SEAL CKKS ciphertexts
(``ckks-packed``: the recommender encrypts and decrypts, the social party computes on ciphertexts).
The validation/test RMSE and MAE must agree within ``--tol`` (CKKS encoding error); the JSON records
both runs, their timings and the differences.

    export FEDGRAPHREC_DATA=../shared/datasets PYTHONPATH=src OMP_NUM_THREADS=1
    python benchmarks/p4gcn_he_epoch.py --methods p4gcn 'p4gcn*' \
        --out results/p4gcn/he_epoch_filmtrust.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.types import Ratings
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.reproduce.p4gcn_paper import paper_eps
from fedgraphrec.training.rating import run_method

KEYS = ("val_rmse", "test_rmse", "test_mae")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", default="filmtrust")
    p.add_argument("--methods", nargs="+", default=["p4gcn"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="ckks-packed")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    data = load_dataset(a.dataset)
    assert isinstance(data, Ratings)
    report: dict[str, object] = {"dataset": a.dataset, "seed": a.seed, "tol": a.tol, "runs": {}}
    ok = True
    for method in a.methods:
        res = {}
        for backend in ("plain", a.backend):
            args = P4GCNSettings(
                dim=64, layers=2, lr=5e-3, batch=256, epochs=1, patience=3, beta=1.0, social_lr=1.0,
                social_reg=1e-2, clip=0.1, eps=paper_eps(a.dataset), backend=backend, reproducible=True,
            )  # fmt: skip
            r = run_method(method, data, a.seed, args)
            r.pop("curve", None)
            res[backend] = r
            print(
                f"{method} {backend}: val RMSE {r['val_rmse']:.6f} test RMSE {r['test_rmse']:.6f} "
                f"MAE {r['test_mae']:.6f}; set-up {r['setup_seconds']:.1f} s, "
                f"epoch {r['epoch_seconds'][0]:.1f} s, total {r['seconds']:.1f} s",
                flush=True,
            )
        diff = {k: abs(res[a.backend][k] - res["plain"][k]) for k in KEYS}
        ratio = res[a.backend]["epoch_seconds"][0] / res["plain"]["epoch_seconds"][0]
        ok = ok and max(diff.values()) <= a.tol
        print(f"{method}: |Δ| {diff}; epoch time ratio {a.backend}/plain {ratio:.0f}x", flush=True)
        report["runs"][method] = {**res, "abs_diff": diff, "epoch_time_ratio": ratio}  # type: ignore[index]
        report["match_within_tol"] = ok
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(report, indent=1))  # after each method, in case a later one fails
    print(f"metrics match within {a.tol}: {ok}")
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
