"""GNN4FR vs LP-GCN: bytes per client per epoch and client compute per epoch, on one dataset.

The two lossless designs trade differently: LP-GCN computes every item once, on its
convolution-client, and ships neighbours' user embeddings to the convolution-clients and item rows
to every holder; GNN4FR computes every item redundantly on every holder (its 2-hop ego graph) and
ships users' embeddings and gradients between all pairs of users that share an item (plus, with
``--paper-literal``, a secret-shared dense item-gradient vector per client and minibatch).

Bytes come from each protocol's ledger over ``--batches`` real minibatches (``accounted`` mode:
the exact ciphertext sizes, no cipher), scaled to one epoch, set-up excluded. Where GNN4FR is too
large to instantiate (``--analytic-gnn4fr``, e.g. Gowalla), its bytes come from the same message
sizes applied to the counted neighbour pairs (the paper-literal scheme; the default transposed
backward replaces the per-pair gradients and the dense vectors by multicast rows and the triples'
direct gradients, see ``protocols/gnn4fr/client.py``). Compute is counted in multiply-adds of the
propagation (forward + backward, all layers) a client performs, averaged over clients.

    python benchmarks/gnn4fr_vs_lpgcn.py --dataset ml-100k --layers 5 --dim 20 \
        --json results/gnn4fr/compare_ml100k.json
    python benchmarks/gnn4fr_vs_lpgcn.py --dataset gowalla --layers 3 --dim 64 --analytic-gnn4fr --json ...
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.aead import ciphertext_size
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.protocols.gnn4fr.local import local_gnn4fr
from fedgraphrec.protocols.gnn4fr.settings import GNN4FRSettings
from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.runtime.codec import encoded_size
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler


def per_client_epoch_bytes(ledger: Ledger, setup: np.ndarray, scale: float) -> float:
    total = ledger.client_sent + ledger.client_received - setup
    return float(total.mean() * scale)


def neighbour_pairs(train: sp.csr_matrix, block: int = 2048) -> int:
    """Σ_u |N_u|: ordered pairs of distinct users sharing an item (row blocks of R Rᵀ)."""
    r = sp.csr_matrix(train, dtype=np.float32)
    rt = r.T.tocsc()
    count = 0
    for start in range(0, r.shape[0], block):
        prod = r[start : start + block] @ rt
        count += prod.nnz - int((prod[:, start : start + block].diagonal() > 0).sum())
    return count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="ml-100k")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--analytic-gnn4fr", action="store_true")
    ap.add_argument("--paper-literal", action="store_true", help="GNN4FR as printed (Algorithm 5, shares)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    data = load_dataset(args.dataset)
    train = sp.csr_matrix(data.train)
    n, m = train.shape
    L, d = args.layers, args.dim
    batches = list(BPRSampler(train, 0, "users").batches(0, args.batch_size))
    scale = len(batches) / args.batches
    u0, v0 = torch.zeros(n, d), torch.zeros(m, d)
    item_deg = np.diff(train.tocsc().indptr).astype(np.float64)
    report: dict[str, object] = {
        "dataset": args.dataset,
        "users": n,
        "items": m,
        "train": int(train.nnz),
        "layers": L,
        "dim": d,
        "batches_per_epoch": len(batches),
    }

    settings = LPGCNSettings(dim=d, n_layers=L, batch_size=args.batch_size)
    cfg = TrainConfig(protocol="lpgcn", dataset=args.dataset, settings=settings)
    lp = ProtocolLearner(cfg, data)
    setup = lp.net.ledger.client_sent + lp.net.ledger.client_received
    for b in batches[: args.batches]:
        lp.train_batch(*b)
    report["lpgcn_bytes_per_client_epoch"] = per_client_epoch_bytes(lp.net.ledger, setup, scale)
    # LP-GCN: every edge is used once for users (Eq. 7) and once for items (Eq. 8), forward and backward
    report["lpgcn_madds_per_client_epoch"] = 4 * L * train.nnz * d / n * len(batches)

    pairs = neighbour_pairs(train)
    row_ct = ciphertext_size(encoded_size((1, d), torch.float32))
    vec = m * d * 8
    per_client_batch = (
        L * (n + pairs) * row_ct  # forward: every client's upload, every forwarded copy it receives
        + 2 * L * pairs * row_ct  # backward: pair messages sent and received
        + n * 2 * (ciphertext_size(vec) + vec)  # shares out and in, upload, aggregate back
    ) / n
    report["gnn4fr_neighbour_pairs"] = pairs
    report["gnn4fr_paper_literal_bytes_per_client_epoch_analytic"] = per_client_batch * len(batches)
    report["gnn4fr_paper_literal"] = args.paper_literal
    if not args.analytic_gnn4fr:
        g = local_gnn4fr(train, u0, v0, GNN4FRSettings(n_layers=L, paper_literal=args.paper_literal))
        setup = g.net.ledger.client_sent + g.net.ledger.client_received
        for b in batches[: args.batches]:
            g.server.train_step(*b)
        report["gnn4fr_bytes_per_client_epoch"] = per_client_epoch_bytes(g.net.ledger, setup, scale)
    else:
        if not args.paper_literal:
            raise SystemExit("--analytic-gnn4fr counts the paper-literal scheme: add --paper-literal")
        report["gnn4fr_bytes_per_client_epoch"] = report[
            "gnn4fr_paper_literal_bytes_per_client_epoch_analytic"
        ]
    # GNN4FR: each holder convolves each of its items over all the item's users, forward and backward
    report["gnn4fr_madds_per_client_epoch"] = 2 * L * float((item_deg**2).sum()) * d / n * len(batches)
    report["bytes_ratio_gnn4fr_over_lpgcn"] = (
        report["gnn4fr_bytes_per_client_epoch"] / report["lpgcn_bytes_per_client_epoch"]
    )  # type: ignore[operator]
    report["compute_ratio_gnn4fr_over_lpgcn"] = (
        report["gnn4fr_madds_per_client_epoch"] / report["lpgcn_madds_per_client_epoch"]
    )  # type: ignore[operator]
    for k, v in report.items():
        print(f"{k:>34}: {v:.4g}" if isinstance(v, float) else f"{k:>34}: {v}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
