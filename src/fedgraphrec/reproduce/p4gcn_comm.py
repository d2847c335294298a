"""Table 3 of P4GCN: communication (GB) of P4GCN vs an analytic model of S3Rec, without running HE.

P4GCN's bytes are the ledger formula ``ct·(N d + k Σ_t |B_t| d)`` (spec §6) evaluated on the exact
batch schedule the protocol draws (the recommender's stream, :mod:`~fedgraphrec.protocols.p4gcn.schedule`),
with ``k = 4`` (three ciphertext messages per iteration plus the A3 re-sync) and ``|B_t|`` the
distinct users of batch ``t``; a unit test checks it against the ledger of a real (plain) run. A
second column, ``padded k=3``, counts the paper's three messages with every batch padded to
``min(|B|, N)`` rows (spec A11), which is what the paper's Table 3 appears to count (its GB are
flat from B = 64 to 1024 and drop at 4096 only where ``N < 4096``).

S3Rec (Cui et al. 2021) is not implemented as a protocol. Its full text was not available here, so
the model below is derived from the spec's description (§7.5: social-regularised MF whose social
terms ``U(D+E)`` and ``U Sᵀ``, restricted to the batch users, are two-party secure matrix products)
and from S3Rec's published abstract (sparsity-aware secure products built on homomorphic
encryption). **Assumptions** ([I], stated in the README too):

* the rating part of the loss is local to the rating platform and costs nothing;
* each of the two social products per iteration is one HE-based sparse product: the rating platform
  supplies Paillier-encrypted rows of ``U`` (``ct`` bytes per entry, same 2048-bit key as P4GCN),
  the social platform multiplies them by its plaintext sparse matrix, masks the ``|B_t| × d``
  result with a random share and returns it encrypted (``ct`` per entry); its own share is then
  sent back for reconstruction (``share`` bytes per entry, a 64-bit ring);
* ``cached``: the social platform keeps ``[U]`` (sent once, ``N d``) and the rating platform
  re-sends the ``|B_t|`` updated rows each iteration, exactly like P4GCN's message 5 — per
  iteration ``ct·3|B_t| d + share·2|B_t| d``;
* ``fetch``: no cache; each iteration the rating platform sends the encrypted rows of the batch
  users and all their (symmetrised) neighbours ``C_t = B_t ∪ N(B_t)`` (the sparsity-aware but
  location-revealing variant) — per iteration ``ct·(|C_t| + 2|B_t|) d + share·2|B_t| d``.

Run: ``fedgraphrec reproduce p4gcn-t3 --reuse results/p4gcn/table1 --out results/reproduce/p4gcn-t3``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from fedgraphrec.protocols.p4gcn.schedule import batch_schedule
from fedgraphrec.reproduce.papers import PaperDataError, Section, paper

__all__ = [
    "PAPER_TABLE3",
    "CommSettings",
    "batch_user_counts",
    "neighbourhood_counts",
    "p4gcn_bytes",
    "s3rec_bytes",
]


def _four(sec: Section, method: str) -> tuple[float, float, float, float]:
    gb = sec.numbers(method)
    if len(gb) != 4:
        raise PaperDataError(f"{sec.where}.{method}: expected [B 64, B 1024, B 4096, prac] in GB")
    return gb[0], gb[1], gb[2], gb[3]


# Paper Table 3 (GB at E = 5; "prac" = the runs of Table 1): {dataset: {method: (B64, B1024, B4096, prac)}},
# from papers/p4gcn-tables.toml.
_T3 = paper("p4gcn-tables").section("t3")
PAPER_TABLE3: dict[str, dict[str, tuple[float, float, float, float]]] = {
    ds: {m: _four(_T3.section("paper").section(ds), m) for m in _T3.section("paper").section(ds).names()}
    for ds in _T3.section("paper").names()
}
BATCHES = (64, 1024, 4096)


@dataclass(frozen=True)
class CommSettings:
    """Sizes shared by both cost models.

    Attributes:
        dim: embedding size ``d`` (64 in the paper).
        key_bits: Paillier modulus bits; a ciphertext is ``2·key_bits/8`` bytes (512 at 2048).
        share_bytes: bytes of one additive secret-share entry (64-bit ring).
        k: P4GCN ciphertext messages of ``|B_t| × d`` per iteration (4 with the A3 re-sync).
    """

    dim: int = 64
    key_bits: int = 2048
    share_bytes: int = 8
    k: int = 4

    @property
    def ct(self) -> int:
        """Bytes of one Paillier ciphertext."""
        return 2 * self.key_bits // 8


def schedule_of(n_records: int, batch_size: int, epochs: int, seed: int) -> list[np.ndarray]:
    """The batch schedule the recommender (:mod:`~fedgraphrec.protocols.p4gcn.recommender_program`) draws.

    The protocol spawns three child seeds (schedule, ``P1``, ``P2``) and uses the first for the
    schedule; reproducing that here lets the byte count be computed without building the parties.
    """
    sched_ss = np.random.SeedSequence(seed).spawn(3)[0]
    return batch_schedule(n_records, batch_size, epochs, np.random.default_rng(sched_ss))


def batch_user_counts(users: np.ndarray, schedule: Sequence[np.ndarray]) -> np.ndarray:
    """``|B_t|``: distinct users of every batch of ``schedule`` (record indices into ``users``)."""
    return np.array([len(np.unique(users[idx])) for idx in schedule], dtype=np.int64)


def neighbourhood_counts(users: np.ndarray, schedule: Sequence[np.ndarray], adj: sp.csr_matrix) -> np.ndarray:
    """``|C_t| = |B_t ∪ N(B_t)|`` in the (symmetrised) social graph ``adj`` for every batch."""
    adj = sp.csr_matrix(adj)
    out = np.empty(len(schedule), dtype=np.int64)
    for t, idx in enumerate(schedule):
        b = np.unique(users[idx])
        nbrs = np.concatenate([b, *(adj.indices[adj.indptr[u] : adj.indptr[u + 1]] for u in b)])
        out[t] = len(np.unique(nbrs))
    return out


def p4gcn_bytes(n_users: int, batch_users: np.ndarray, cs: CommSettings) -> int:
    """Ciphertext bytes of P4GCN: ``ct·(N d + k Σ_t |B_t| d)`` (the ledger's cipher phases)."""
    return cs.ct * (n_users * cs.dim + cs.k * int(np.sum(batch_users)) * cs.dim)


def s3rec_bytes(
    n_users: int, batch_users: np.ndarray, cs: CommSettings, neighbourhood: np.ndarray | None = None
) -> int:
    """S3Rec model bytes: ``cached`` when ``neighbourhood`` is None, else ``fetch`` (module doc)."""
    sum_b = int(np.sum(batch_users))
    shares = cs.share_bytes * 2 * sum_b * cs.dim
    if neighbourhood is None:
        return cs.ct * (n_users * cs.dim + 3 * sum_b * cs.dim) + shares
    return cs.ct * (int(np.sum(neighbourhood)) + 2 * sum_b) * cs.dim + shares


def dataset_costs(
    users: np.ndarray, n_users: int, adj: sp.csr_matrix, batch: int, epochs: int, seed: int, cs: CommSettings
) -> dict[str, float]:
    """GB (1e9 bytes) of P4GCN and both S3Rec variants for one batch size and epoch count."""
    sched = schedule_of(len(users), batch, epochs, seed)
    b = batch_user_counts(users, sched)
    c = neighbourhood_counts(users, sched, adj)
    padded = np.minimum([len(idx) for idx in sched], n_users)
    return {
        "p4gcn": p4gcn_bytes(n_users, b, cs) / 1e9,
        "p4gcn_padded_k3": p4gcn_bytes(n_users, padded, replace(cs, k=3)) / 1e9,
        "s3rec_cached": s3rec_bytes(n_users, b, cs) / 1e9,
        "s3rec_fetch": s3rec_bytes(n_users, b, cs, c) / 1e9,
        "iterations": len(sched),
        "mean_batch_users": float(b.mean()),
        "mean_neighbourhood": float(c.mean()),
    }


# Batch sizes of the Table 1 runs (results/p4gcn/README.md) for runs whose JSON predates the "batch" key.
PRAC_BATCH = {ds: _T3.section("prac_batch").integer(ds) for ds in _T3.section("prac_batch").names()}


def _prac(folder: Path, dataset: str) -> dict[str, Any]:
    """Mean "Prac." GB over seeds: P4GCN from its ledger, S3Rec modelled on the sesorec runs' schedule."""
    out: dict[str, Any] = {}
    p4 = [json.loads(f.read_text()) for f in sorted(folder.glob(f"{dataset}_p4gcn_s*.json"))]
    if p4:
        out["p4gcn"] = float(np.mean([r["cipher_GB"] for r in p4]))
    runs = [json.loads(f.read_text()) for f in sorted(folder.glob(f"{dataset}_sesorec_s*.json"))]
    out["s3rec_runs"] = [
        {"seed": r["seed"], "epochs": len(r["curve"]), "batch": r.get("batch", PRAC_BATCH.get(dataset))}
        for r in runs
    ]
    return out


def table3(
    datasets: Sequence[str], table1: Path | None, cs: CommSettings, epochs: int = 5, seed: int = 0
) -> dict[str, Any]:
    """All rows of Table 3 (ours and the paper's) for ``datasets``; JSON-ready."""
    from fedgraphrec.data.registry import load_dataset
    from fedgraphrec.data.types import Ratings
    from fedgraphrec.training.p4gcn_learner import rating_splits as _splits

    result: dict[str, Any] = {"settings": {**cs.__dict__, "ct_bytes": cs.ct, "epochs": epochs}, "rows": {}}
    for ds in datasets:
        data = load_dataset(ds)
        assert isinstance(data, Ratings) and data.social is not None
        adj = data.social.adjacency(symmetric=True)
        rows: dict[str, Any] = {}
        for b in BATCHES:
            users = _splits(data, seed)[0][0]
            rows[str(b)] = dataset_costs(users, data.n_users, adj, b, epochs, seed, cs)
        if table1 is not None:
            prac = _prac(table1, ds)
            s3 = []
            for r in prac.pop("s3rec_runs"):
                if r["batch"] is None:
                    continue
                users = _splits(data, r["seed"])[0][0]
                s3.append(dataset_costs(users, data.n_users, adj, r["batch"], r["epochs"], r["seed"], cs))
            if s3:
                prac["s3rec_cached"] = float(np.mean([c["s3rec_cached"] for c in s3]))
                prac["s3rec_fetch"] = float(np.mean([c["s3rec_fetch"] for c in s3]))
            rows["prac"] = prac
        result["rows"][ds] = {"ours": rows, "paper": PAPER_TABLE3.get(ds, {}), "n_users": data.n_users}
    return result


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "–"


def verdict(dataset: str, rows: dict[str, Any]) -> str:
    """One line: does P4GCN/S3Rec fall on the paper's side of 1 (>1 on FT/CD/DB, <1 on EP) at E = 5?"""
    paper = PAPER_TABLE3[dataset]
    want_above = paper["p4gcn"][0] > paper["s3rec"][0]
    parts = []
    for var in ("s3rec_cached", "s3rec_fetch"):
        ratios = [rows[str(b)]["p4gcn"] / rows[str(b)][var] for b in BATCHES]
        ok = all((r > 1) == want_above for r in ratios)
        parts.append(f"{var}: {'holds' if ok else 'does not hold'} ({min(ratios):.2f}–{max(ratios):.2f})")
    side = "P4GCN > S3Rec" if want_above else "P4GCN < S3Rec"
    paper_r = [paper["p4gcn"][i] / paper["s3rec"][i] for i in range(3)]
    head = f"**{dataset}**: paper {side} (ratio {min(paper_r):.2f}–{max(paper_r):.2f}); ours "
    return head + "; ".join(parts)


def to_markdown(result: dict[str, Any]) -> str:
    """Markdown table (GB = 1e9 bytes) with the ratio P4GCN/S3Rec and one verdict line per dataset."""
    lines = [
        "| dataset | B | P4GCN (ours) | P4GCN padded k=3 | S3Rec cached (ours) | S3Rec fetch (ours) "
        "| P4/S3 cached | P4/S3 fetch | P4GCN (paper) | S3Rec (paper) | P4/S3 (paper) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for ds, entry in result["rows"].items():
        ours, paper = entry["ours"], entry["paper"]
        for j, key in enumerate([*map(str, BATCHES), "prac"]):
            o = ours.get(key)
            if o is None:
                continue
            p4, c, f = o.get("p4gcn"), o.get("s3rec_cached"), o.get("s3rec_fetch")
            pp = paper["p4gcn"][j] if paper else None
            ps = paper["s3rec"][j] if paper else None

            def gb(x: float | None) -> str:
                return f"{x:.2f}" if x is not None else "–"

            lines.append(
                f"| {ds} | {key} | {gb(p4)} | {gb(o.get('p4gcn_padded_k3'))} | {gb(c)} | {gb(f)} "
                f"| {_ratio(p4, c)} | {_ratio(p4, f)} | {gb(pp)} | {gb(ps)} | {_ratio(pp, ps)} |"
            )
        if ds in PAPER_TABLE3:
            verdicts.append("- " + verdict(ds, ours))
    return "\n".join([*lines, "", *verdicts])


def write_table3(
    out: Path,
    datasets: Sequence[str] = tuple(PAPER_TABLE3),
    table1: Path | None = None,
    *,
    epochs: int = 5,
    seed: int = 0,
    key_bits: int = 2048,
) -> str:
    """Table 3 for ``datasets``: writes ``out.json`` and ``out.md`` (``out``: a path stem); returns the md.

    ``table1``: a folder of Table 1 run files for the "Prac." rows (optional).
    """
    result = table3(list(datasets), table1, CommSettings(key_bits=key_bits), epochs, seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    md = to_markdown(result)
    out.with_suffix(".md").write_text(md + "\n")
    return md
