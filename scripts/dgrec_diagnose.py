"""Why are the decentralised DGREC-family runs at chance? Small diagnostics that separate the causes.

``python -m scripts.dgrec_diagnose WHAT --out results/dgrec/diagnose/diagnose.jsonl``
runs one of these on Flixster (or ``--dataset ciao-10core``) and appends its JSON line
(results/dgrec/README.md, "Diagnosis"):

* ``eval_path``: a centralized BPR-MF (the project's :class:`~fedgraphrec.training.trainer.Trainer`,
  d = 16) copied into every user's DMF model and scored by :meth:`DGREC.evaluate` (each user's own
  model) must give the central evaluator's recall@20 — tests the per-user evaluation, masking, ids;
* ``popularity``: recall@20 of the train-popularity ranking (what a barely trained model can reach);
* ``central``: a centralised model (``--model lightgcn`` or ``mf``, the project's
  :class:`~fedgraphrec.training.trainer.Trainer`) trained and evaluated on exactly the runner's
  train/test matrices (for subsets such as ``ciao-10core`` that the registry does not know);
* ``participation``: how many group steps each user joins in the runner's budget (Algorithm 1 only,
  Eq.-4 weights from the counts), i.e. how many SGD steps each user's *own* model receives;
* ``snr``: per-coordinate signal (|group mean of the clipped gradient|) of one Algorithm-1 group at
  initialisation against the standard deviation of the decoded one-bit mean, for β = 1 and β = 50;
* ``fixed_group``: one Algorithm-1 group (or ``--size`` random users) trained alone for ``steps``
  group steps with a given variant and learning rate — loss curve and the members' recall@20.

Each user keeps its own item table, so a user's model only learns from the group steps it joins;
that, not the number of triples summed over all users, is what bounds learning.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

import numpy as np
import torch

from fedgraphrec.data.types import Interactions
from fedgraphrec.evaluation.ranking import evaluate_scores
from fedgraphrec.privacy.one_bit import decode_scale
from fedgraphrec.protocols.dgrec import DGREC
from fedgraphrec.protocols.dgrec.sampling import sample_group, sampling_weights
from fedgraphrec.seeding import numpy_rng
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.dgrec import load_side, settings_for
from fedgraphrec.training.trainer import Trainer, evaluate_embeddings_on

__all__ = ["central", "eval_path", "fixed_group", "participation", "popularity", "snr"]


def eval_path(dataset: str, epochs: int = 100, seed: int = 0) -> dict[str, Any]:
    """Central BPR-MF recall@20 by the central evaluator and by DGREC's per-user evaluator."""
    cfg = TrainConfig(
        dataset=dataset, model="mf", dim=16, epochs=epochs, lr=0.01, seed=seed, eval_every=epochs
    )
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, tmp, progress=False)
        trainer.fit()
    users, items = trainer.learner.embeddings()
    central = evaluate_embeddings_on(users, items, trainer.data, [20])
    train, test, social, tags = load_side(dataset)
    same_split = (train != trainer.data.train).nnz == 0 and (test != trainer.data.test).nnz == 0
    rec = DGREC(train, social, tags, settings_for("dmf"), seed=seed)
    rec.models.params["E"][:] = items.float()
    rec.models.params["user"][:] = users.float()
    return {
        "central_recall@20": central["recall@20"],
        "dgrec_evaluator_recall@20": rec.evaluate(test, [train])["recall@20"],
        "same_split": bool(same_split),
    }


def central(dataset: str, model: str = "lightgcn", epochs: int = 100, seed: int = 0) -> dict[str, Any]:
    """A centralised ``model`` (d = 64, Adam 0.001 as the ``train central`` defaults) on the runner's split.

    It trains on the same train matrix as the DGREC runs and is evaluated the same way (test items,
    train items masked), so it is the centralised reference level of a table on that split.
    """
    train, test, _, _ = load_side(dataset)
    data = Interactions(name=dataset, n_users=train.shape[0], n_items=train.shape[1], train=train, test=test)
    cfg = TrainConfig(dataset=dataset, model=model, epochs=epochs, seed=seed, eval_every=epochs, threads=1)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        result = Trainer(cfg, tmp, progress=False, data=data).fit()
    test_metrics = result.summary["test"]
    return {
        "dataset": dataset,
        "model": model,
        "epochs": epochs,
        "seed": seed,
        "recall@20": test_metrics["recall@20"],
        "ndcg@20": test_metrics["ndcg@20"],
        "seconds": time.time() - t0,
    }


def popularity(dataset: str) -> dict[str, float]:
    """recall@20 of ranking every user's unseen items by training popularity, and of random scores."""
    train, test, _, _ = load_side(dataset)
    pop = torch.from_numpy(np.asarray(train.sum(0)).ravel()).float()
    n_users, n_items = train.shape
    res = evaluate_scores(lambda u: pop.expand(len(u), -1), n_users, n_items, test, [train], ks=(20,))
    gen = torch.Generator().manual_seed(0)
    rnd = evaluate_scores(
        lambda u: torch.rand(len(u), n_items, generator=gen), n_users, n_items, test, [train], ks=(20,)
    )
    return {
        "popularity_recall@20": res.metrics["recall@20"],
        "popularity_ndcg@20": res.metrics["ndcg@20"],
        "random_recall@20": rnd.metrics["recall@20"],
        "random_ndcg@20": rnd.metrics["ndcg@20"],
    }


def participation(dataset: str, variant: str, epochs: int, centres: int, seed: int = 0) -> dict[str, Any]:
    """Group steps each user joins in ``epochs`` × ``centres`` (sampling only; loss weights fixed to 1)."""
    train, test, social, _ = load_side(dataset)
    s = settings_for(variant)
    soc = ((social + social.T) > 0).astype(np.float64).tocsr()
    soc.setdiag(0)
    soc.eliminate_zeros()
    deg = np.diff(train.indptr)
    active = np.flatnonzero(deg > 0)
    count = np.zeros(train.shape[0])
    sizes = []
    for e in range(epochs):
        rng = numpy_rng(seed, "diag", e)
        for c in rng.choice(active, size=min(centres, len(active)), replace=False):
            links = sample_group(
                soc, int(c), s.hops, s.fanout, sampling_weights(np.ones_like(count), count), rng
            )
            count[list(links)] += 1
            sizes.append(len(links))
    tested = np.flatnonzero(np.diff(test.indptr) > 0)
    ct = count[tested]
    return {
        "variant": variant,
        "group_steps": len(sizes),
        "mean_group_size": float(np.mean(sizes)),
        "test_users": len(tested),
        "test_users_never_updated": float((ct == 0).mean()),
        "steps_per_test_user_mean": float(ct.mean()),
        "steps_per_test_user_median": float(np.median(ct)),
    }


def _group(rec: DGREC, rng: np.random.Generator) -> dict[int, set[int]]:
    """The Algorithm-1 group (H = 4, n_u = 3) of the best-connected user."""
    centre = int(np.argmax(np.diff(rec.social.indptr)))
    return sample_group(rec.social, centre, 4, 3, sampling_weights(rec.loss, rec.count), rng)


def snr(
    dataset: str,
    variant: str = "dgrec",
    seed: int = 0,
    betas: tuple[float, ...] = (1.0, 50.0),
    loss_scale: str | None = None,
) -> dict[str, Any]:
    """Signal vs one-bit decoding noise of one group step at initialisation (no update is made).

    Signal per coordinate: ``|mean_v clip(g_v, δ)|``; noise: the exact standard deviation of the
    decoded mean, ``sqrt(Σ_v (c² − clip(g_v)²)) / |U|`` with ``c = δ(e^β+1)/(e^β−1)``. Item-table
    coordinates are reported apart (most are exactly zero: items in no member's batch).
    ``loss_scale``: ``eq2`` / ``mean`` (default: the variant's).
    """
    train, _, social, tags = load_side(dataset)
    over: dict[str, Any] = {"model": {"loss_scale": loss_scale}} if loss_scale else {}
    rec = DGREC(train, social, tags, settings_for(variant, **over), seed=seed)
    rng = numpy_rng(seed, "diag-snr")
    users = np.asarray(sorted(_group(rec, rng)))
    raw = rec.local_gradients(users, rng).double()
    g = raw.clamp(-rec.s.delta, rec.s.delta)
    n_item = rec.models.params["E"][0].numel()  # "E" is the first shared parameter
    signal = g.mean(0).abs()
    item_sig = signal[:n_item]
    touched = item_sig[item_sig > 0]
    out: dict[str, Any] = {
        "variant": variant,
        "loss_scale": rec.s.model.loss_scale,
        "group_size": len(users),
        "share_of_nonzero_coords_at_delta": float(
            (raw.abs() >= rec.s.delta).double().sum() / (raw != 0).sum()
        ),
        "median_abs_nonzero_grad": float(raw[raw != 0].abs().median()),
        "item_coords_touched": float((item_sig > 0).double().mean()),
        "item_signal_median_touched": float(touched.median()),
        "item_signal_p99_touched": float(touched.quantile(0.99)),
        "other_signal_median": float(signal[n_item:].median()) if len(signal) > n_item else 0.0,
    }
    for beta in betas:
        c = decode_scale(rec.s.delta, beta)
        noise = (c**2 - g.pow(2)).sum(0).sqrt() / len(users)
        out[f"noise_std_beta{beta:g}"] = float(noise.median())
        out[f"item_touched_snr_median_beta{beta:g}"] = float(
            (item_sig / noise[:n_item])[item_sig > 0].median()
        )
    return out


def fixed_group(
    dataset: str,
    variant: str,
    lr: float,
    steps: int,
    eval_every: int,
    size: int = 0,
    seed: int = 0,
    **over: Any,
) -> dict[str, Any]:
    """Train one fixed group alone; loss and its members' recall@20 (own models) over steps.

    ``size = 0``: the Algorithm-1 group (H = 4, n_u = 3) of the best-connected user; ``size > 0``:
    that many random users with training items, linked as a star (links only matter for one-bit
    flooding). ``over``: further settings (``beta``, ``batch``, …).
    """
    train, test, social, tags = load_side(dataset)
    rec = DGREC(train, social, tags, settings_for(variant, lr=lr, hops=4, **over), seed=seed)
    rng = numpy_rng(seed, "diag-group")
    if size:
        pick = rng.choice(np.flatnonzero(rec.deg > 0), size=size, replace=False).tolist()
        links = {pick[0]: set(pick[1:]), **{v: {pick[0]} for v in pick[1:]}}
    else:
        links = _group(rec, rng)
    members = np.asarray(sorted(links))
    members = members[np.diff(test.indptr)[members] > 0]
    curve: list[dict[str, float]] = [{"step": 0, **rec.evaluate(test, [train], users=members)}]
    t0 = time.time()
    for t in range(1, steps + 1):
        rec.group_step(links, rng)
        if t % eval_every == 0:
            loss = float(rec.loss[members].mean())
            curve.append({"step": t, "loss": loss, **rec.evaluate(test, [train], users=members)})
    return {
        "variant": variant,
        "lr": lr,
        **over,
        "group_size": len(links),
        "evaluated_members": len(members),
        "seconds": time.time() - t0,
        "curve": curve,
    }


def main() -> None:
    """Command-line entry point: run the chosen diagnostics and write one JSON."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "what", choices=["central", "eval_path", "popularity", "participation", "snr", "fixed_group"]
    )
    ap.add_argument("--model", default="lightgcn", help="central: the centralised model")
    ap.add_argument("--seed", type=int, default=0, help="central: seed")
    ap.add_argument("--central-epochs", type=int, default=100, help="central: training epochs")
    ap.add_argument("--dataset", default="flixster")
    ap.add_argument("--variant", default="dmf")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--centres", type=int, default=300)
    ap.add_argument("--size", type=int, default=0, help="fixed_group: random members (0: an Alg.-1 group)")
    ap.add_argument(
        "--beta", type=float, default=1.0, help="fixed_group: one-bit β (large: almost no LDP noise)"
    )
    ap.add_argument("--loss-scale", default=None, help="snr: eq2 or mean (default: the variant's)")
    ap.add_argument("--out", default=None, help="append the result as one JSON line to this file")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.what == "central":
        res = central(a.dataset, a.model, a.central_epochs, a.seed)
    elif a.what == "eval_path":
        res = eval_path(a.dataset)
    elif a.what == "popularity":
        res = popularity(a.dataset)
    elif a.what == "snr":
        res = snr(a.dataset, a.variant, loss_scale=a.loss_scale)
    elif a.what == "participation":
        res = participation(a.dataset, a.variant, a.epochs, a.centres)
    else:
        res = fixed_group(a.dataset, a.variant, a.lr, a.steps, a.eval_every, a.size, beta=a.beta)
    line = json.dumps({"diagnostic": a.what, "dataset": a.dataset, **res})
    print(line)
    if a.out:
        with open(a.out, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
