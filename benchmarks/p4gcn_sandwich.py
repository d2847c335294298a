"""One P4GCN sandwich step (forward + backward) on FilmTrust: packed CKKS vs per-element Paillier.

Batch of 256 distinct users, d = 64, the FilmTrust social graph (A1-symmetrised, ``L̃/N``). One step is
what both parties do per iteration around the two sandwiches: the social party's forward
``(B L̃)[X] W1 + Enc(E)`` and backward ``(B L̃ Bᵀ)[G] W1ᵀ + Enc(E)``, the recommender's encryption of
``G`` and decryption of both results. ``[X]`` is set-up (encrypted once) and not timed.

Packed CKKS (``ckks-packed``: SEAL via TenSEAL, N = 8192, interleaved rows and the baby-step/giant-step
diagonal method, see ``fedgraphrec.crypto.he.packed``) is timed on the whole batch, decryptions
included. Paillier (2048-bit by default) is timed per output row on ``--paillier-rows`` rows of each
sandwich and per element for encryption/decryption, then scaled linearly to the batch (every row and
element costs the same kind of work; stated in the output). Both run in this one process, alternating
``--repeats`` times (minimum of each kept, so that load from other jobs on a shared machine hits both
alike), and the ratio is printed.

    FEDGRAPHREC_DATA=../shared/datasets PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/p4gcn_sandwich.py
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fedgraphrec.crypto.he.packed import PackedCKKSBackend
from fedgraphrec.crypto.he.paillier import PaillierBackend
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.types import Ratings
from fedgraphrec.privacy.matrix_gaussian import clip_frobenius, normalized_adjacency


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--key-bits", type=int, default=2048)
    p.add_argument("--paillier-rows", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    data = load_dataset("filmtrust")
    assert isinstance(data, Ratings) and data.social is not None
    n, d = data.n_users, args.dim
    rng = np.random.default_rng(args.seed)
    lt = normalized_adjacency(data.social.adjacency(symmetric=True), scale=1.0 / n)
    deg = np.diff(lt.indptr)
    batch = np.sort(rng.choice(n, size=args.batch, replace=False))
    x = rng.normal(size=(n, d))
    x *= 0.1 / np.linalg.norm(x, axis=1).max()
    w1 = clip_frobenius(rng.normal(size=(d, d)), 0.1)
    g = rng.normal(size=(args.batch, d)) * 1e-3
    noise = rng.normal(size=(args.batch, d)) * 1e-5
    fwd_left, bwd_left = lt[batch], lt[batch][:, batch]
    print(f"FilmTrust N={n}, batch={args.batch}, d={d}, mean row nnz of B·L̃={np.mean(deg[batch]):.2f}")

    t0 = time.perf_counter()
    ck = PackedCKKSBackend(dim=d)
    t_keys = time.perf_counter() - t0
    t0 = time.perf_counter()
    enc_x = ck.encrypt(x)  # set-up, not timed
    print(f"{ck!r}: key generation {t_keys:.2f} s, set-up [X] ({n} rows) {time.perf_counter() - t0:.1f} s")
    pa = PaillierBackend(key_bits=args.key_bits)
    t_ckks, t_pai = float("inf"), float("inf")
    for rep in range(args.repeats):
        c, q = (
            _ckks_step(ck, enc_x, fwd_left, bwd_left, x, w1, g, noise),
            _paillier_step(pa, args, fwd_left, bwd_left, x, w1, g, noise),
        )
        print(f"repeat {rep}: packed CKKS {c:.2f} s, Paillier {q:.1f} s")
        t_ckks, t_pai = min(t_ckks, c), min(t_pai, q)
    print(f"min over repeats: packed CKKS step {t_ckks:.2f} s, Paillier step {t_pai:.1f} s")
    print(f"speed-up packed CKKS over per-element Paillier: {t_pai / t_ckks:.1f}x")


def _ckks_step(ck, enc_x, fwd_left, bwd_left, x, w1, g, noise) -> float:  # type: ignore[no-untyped-def]
    """One packed step on the whole batch; prints its parts and error; returns seconds."""
    t0 = time.perf_counter()
    enc_y = ck.sandwich(fwd_left, enc_x, w1, noise)
    t1 = time.perf_counter()
    y = ck.decrypt(enc_y)
    t2 = time.perf_counter()
    enc_g = ck.encrypt(g)
    t3 = time.perf_counter()
    enc_d = ck.sandwich(bwd_left, enc_g, w1.T, noise)
    t4 = time.perf_counter()
    delta = ck.decrypt(enc_d)
    t_ckks = time.perf_counter() - t0
    print(
        f"packed CKKS parts: forward sandwich {t1 - t0:.2f} s, decrypt {t2 - t1:.3f} s, encrypt [G] "
        f"{t3 - t2:.2f} s, backward sandwich {t4 - t3:.2f} s, decrypt {time.perf_counter() - t4:.3f} s"
    )
    err = max(
        np.abs(y - (np.asarray(fwd_left @ x) @ w1 + noise)).max(),
        np.abs(delta - (np.asarray(bwd_left @ g) @ w1.T + noise)).max(),
    )
    signal = max(np.abs(np.asarray(fwd_left @ x) @ w1).max(), np.abs(np.asarray(bwd_left @ g) @ w1.T).max())
    print(f"packed CKKS step: {t_ckks:.2f} s (max abs error vs float64 {err:.2e}; max |L M W| {signal:.2e})")
    return t_ckks


def _paillier_step(pa, args, fwd_left, bwd_left, x, w1, g, noise) -> float:  # type: ignore[no-untyped-def]
    """Per-element Paillier measured on ``--paillier-rows`` rows, scaled to the batch; seconds."""
    d = x.shape[1]
    r = args.paillier_rows
    rows = np.arange(r)
    need = np.unique(fwd_left[rows].indices)
    enc_sub = pa.encrypt(x[need])  # set-up rows, not timed
    sub_left = fwd_left[rows][:, need]
    t0 = time.perf_counter()
    res_f = pa.sandwich(sub_left, enc_sub, w1, noise[rows])
    t_fwd_row = (time.perf_counter() - t0) / r
    need_b = np.unique(bwd_left[rows].indices)
    t0 = time.perf_counter()
    enc_gb = pa.encrypt(g[need_b])
    t_enc_el = (time.perf_counter() - t0) / (len(need_b) * d)
    t0 = time.perf_counter()
    res_b = pa.sandwich(bwd_left[rows][:, need_b], enc_gb, w1.T, noise[rows])
    t_bwd_row = (time.perf_counter() - t0) / r
    t0 = time.perf_counter()
    yf = pa.decrypt(res_f)
    yb = pa.decrypt(res_b)
    t_dec_el = (time.perf_counter() - t0) / (2 * r * d)
    err_p = max(
        np.abs(yf - (np.asarray(sub_left @ x[need]) @ w1 + noise[rows])).max(),
        np.abs(yb - (np.asarray(bwd_left[rows][:, need_b] @ g[need_b]) @ w1.T + noise[rows])).max(),
    )
    b = args.batch
    t_pai = b * (t_fwd_row + t_bwd_row) + b * d * t_enc_el + 2 * b * d * t_dec_el
    print(
        f"Paillier-{args.key_bits} per row: forward {t_fwd_row:.2f} s, backward {t_bwd_row:.2f} s; "
        f"per element: enc {t_enc_el * 1e3:.2f} ms, dec {t_dec_el * 1e3:.2f} ms (max abs error {err_p:.2e})"
    )
    print(f"Paillier step (scaled from {r} rows to {b}): {t_pai:.1f} s")
    return t_pai


if __name__ == "__main__":
    main()
