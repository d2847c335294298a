r"""Write a small LightGCN-format folder (train.txt, test.txt) from a seeded user sample of a dataset.

For timing a protocol on a user-sized dataset without committing data: ``--users`` users drawn
with a seeded generator, then only items at least ``--min-item-users`` of them trained on (ids
compacted), users left without a training item dropped. The folder goes wherever ``--out`` says
(e.g. ``/tmp``); its statistics are printed.

    FEDGRAPHREC_DATA=../shared/datasets python benchmarks/lightgcn_sample.py --dataset gowalla \
        --users 2000 --min-item-users 3 --seed 0 --out /tmp/gowalla-2k
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from fedgraphrec.data.registry import load_dataset


def _write(path: Path, m: sp.csr_matrix) -> None:
    with path.open("w") as f:
        for u in range(m.shape[0]):
            items = m.indices[m.indptr[u] : m.indptr[u + 1]]
            f.write(" ".join(map(str, [u, *np.sort(items).tolist()])) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="gowalla")
    ap.add_argument("--users", type=int, default=2000)
    ap.add_argument("--min-item-users", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    data = load_dataset(args.dataset)
    rng = np.random.default_rng(args.seed)
    users = np.sort(rng.choice(data.train.shape[0], size=args.users, replace=False))
    train, test = data.train[users].tocsr(), data.test[users].tocsr()
    items = np.flatnonzero(np.diff(train.tocsc().indptr) >= args.min_item_users)
    train, test = train[:, items].tocsr(), test[:, items].tocsr()
    keep = np.diff(train.indptr) > 0
    train, test = train[keep], test[keep]
    args.out.mkdir(parents=True, exist_ok=True)
    _write(args.out / "train.txt", train)
    _write(args.out / "test.txt", test)
    print(f"{args.out}: {train.shape[0]} users, {train.shape[1]} items, {train.nnz} train, {test.nnz} test")


if __name__ == "__main__":
    main()
