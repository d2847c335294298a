"""Issue 30 §3: under ``--crypto real`` every hiding draw comes from the CSPRNG unless ``reproducible``.

For each party-program protocol with hiding draws, two runs of one seed with real crypto and default
settings draw different hiding values (initial tables, virtual items, cover gradients, negatives,
pseudo items, LDP noise), and with ``reproducible = true`` they draw the same; ``summary.json`` says
which source a run used; and a server holding only ``config.toml`` can no longer regenerate LP-GCN's
initial tables to match the plaintext ``sync/l=0`` rows it relays to item ids.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tomli_w
import torch

from fedgraphrec.protocols.baselines.fedpergnn.local import LocalResult, protected_rows
from fedgraphrec.training.config import ConfigError, TrainConfig
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner, initial_tables
from fedgraphrec.training.sampler import BPRSampler
from fedgraphrec.training.trainer import Trainer

SMALL = {"n_users": 40, "n_items": 50, "mean_degree": 5.0}


def _cfg(protocol: str, *sets: str, **values: Any) -> TrainConfig:
    base = {"protocol": protocol, "dataset": "synthetic", "crypto": "real", "seed": 5}
    cfg = load_config(None, list(sets), **{**base, **values})
    return load_config(base=dataclasses.replace(cfg, dataset_options=dict(SMALL), transcripts=True), dim=4)


def _server_view(learner: ProtocolLearner, phase: str) -> list[np.ndarray]:
    """What the server received at ``phase``, as arrays (plaintext parts only)."""
    out = []
    for e in learner.net.transcript.of("server"):
        if e.phase == phase:
            out += [np.asarray(torch.as_tensor(p)) for p in e.payloads if not isinstance(p, bytes)]
    assert out, f"the server received nothing at {phase}"
    return out


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b, strict=False)
    )


# ---------------------------------------------------------------------- the switch and its report
def test_real_crypto_hides_by_default_and_reproducible_is_one_explicit_switch() -> None:
    real, accounted = TrainConfig(protocol="lpgcn", crypto="real"), TrainConfig(protocol="lpgcn")
    hidden = {"reproducible": False, "init": "csprng", "cover": "csprng", "noise": "csprng"}
    assert real.randomness() == {**hidden, "seeded_overrides": []}
    seeded = {"reproducible": True, "init": "seed", "cover": "seed", "noise": "seed", "seeded_overrides": []}
    assert accounted.randomness() == seeded
    research = load_config(None, ["reproducible=true"], protocol="lpgcn", crypto="real")
    assert research.randomness() == seeded
    # a per-feature override asking for seeded draws under real crypto is honoured and reported
    mixed = load_config(None, ["secure_init=false"], protocol="lpgcn", crypto="real")
    assert mixed.randomness()["init"] == "seed" and mixed.randomness()["cover"] == "csprng"
    assert mixed.randomness()["seeded_overrides"] == ["secure_init"]
    # the protocols' settings follow the same rule
    assert real.program_settings().secure_virtual_items
    assert not accounted.program_settings().secure_virtual_items
    assert TrainConfig(protocol="fedncf", crypto="real").program_settings().secure_cover
    assert (
        not TrainConfig(protocol="fedncf", crypto="real", reproducible=True).program_settings().secure_cover
    )
    s = TrainConfig(protocol="fedpergnn", crypto="real").program_settings()
    assert s.secure_cover and s.secure_noise
    with pytest.raises(ConfigError, match="reproducible expects"):
        load_config(None, ["reproducible='yes'"])


def test_the_run_folder_records_the_rule_not_a_frozen_flag(tmp_path: Path) -> None:
    """config.toml leaves the unset switch out, so reloading it derives the same sources."""
    cfg = TrainConfig(protocol="lpgcn", crypto="real")
    (tmp_path / "config.toml").write_text(tomli_w.dumps(cfg.to_dict()))
    again = load_config(tmp_path / "config.toml")
    assert again.reproducible is None and again.randomness() == cfg.randomness()


def test_summary_json_reports_where_the_hiding_draws_came_from(tmp_path: Path) -> None:
    sets = ["dataset_options.n_users=20", "dataset_options.n_items=25", "dim=4", "n_layers=1", "epochs=1"]
    for name, extra, source in (("real", [], "csprng"), ("research", ["reproducible=true"], "seed")):
        cfg = load_config(None, [*sets, *extra, "batch_size=64", "alpha=1"], protocol="lpgcn", crypto="real")
        Trainer(cfg, tmp_path / name, progress=False).fit()
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["randomness"]["init"] == summary["randomness"]["cover"] == source
        assert summary["randomness"]["reproducible"] is (source == "seed")


# ---------------------------------------------------------------------- LP-GCN
def _lpgcn(cfg: TrainConfig) -> tuple[ProtocolLearner, Any]:
    data = prepare_interactions(cfg)
    learner = ProtocolLearner(cfg, data)
    users, pos, neg = next(iter(BPRSampler(data.train, seed=cfg.seed).batches(0, 64)))
    learner.train_batch(users, pos, neg)
    return learner, data


def test_lpgcn_server_with_config_toml_cannot_map_sync_rows_to_item_ids(tmp_path: Path) -> None:
    """The attack: regenerate the initial item table from config.toml, match step 0's plaintext
    ``sync/l=0`` rows against it, and read off the item id behind every token. With the seeded tables
    (``reproducible``) every synced row matches; with real crypto's defaults none does. (The transcript holds
    the received tensors, which the step's Adam update then moves by about ``lr``: a tiny ``lr`` keeps
    them within the matching tolerance of what the server received.)"""

    def matched(*sets: str) -> tuple[int, int]:
        cfg = _cfg("lpgcn", *sets, n_layers=1, alpha=2, dtype="float64", batch_size=64, lr=1e-12)
        learner, data = _lpgcn(cfg)
        (tmp_path / "config.toml").write_text(tomli_w.dumps(cfg.to_dict()))
        # the server's best guess from the run folder: the seed's public init stream
        known = load_config(tmp_path / "config.toml", ["secure_init=false"])
        regen = initial_tables(known, data)["item_emb"].numpy()
        rows = np.concatenate(_server_view(learner, "sync/l=0"))
        hits = sum(bool(np.isclose(regen, r, rtol=0, atol=1e-9).all(axis=1).any()) for r in rows)
        return hits, len(rows)

    hits, n = matched("reproducible=true")
    assert n > 20 and hits == n  # the research setting: every row named
    hits, n = matched()
    assert n > 20 and hits == 0  # real crypto's default: nothing to match


def test_lpgcn_virtual_items_and_tables_differ_between_runs_unless_reproducible() -> None:
    def draw(*sets: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cfg = _cfg("lpgcn", *sets, n_layers=1, alpha=3, batch_size=64)
        learner, _ = _lpgcn(cfg)
        (program,) = learner.programs.values()
        st = program.state
        held = np.stack([st.held_idx, st.held_virtual.astype(np.int64)])
        return held, np.sort(st.held_idx[st.held_virtual]), learner.tables()["item_emb"].numpy()

    (h1, v1, t1), (h2, v2, t2) = draw(), draw()
    assert not np.array_equal(v1, v2) and not np.array_equal(t1, t2)
    (h1, v1, t1), (h2, v2, t2) = draw("reproducible=true"), draw("reproducible=true")
    assert np.array_equal(h1, h2) and np.array_equal(t1, t2)


def test_lightgcn_plus_literal_virtual_w_gradients_differ_unless_reproducible() -> None:
    """Alg. 7's random W-gradients of virtual items are cover: asked twice for the same step's
    upload, a client draws them afresh from the CSPRNG, or — seeded — exactly again from the seed."""

    def twice(*sets: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cfg = _cfg("lpgcn", *sets, model="lightgcn+", paper_literal=True, n_layers=1, alpha=3, batch_size=64)
        learner, _ = _lpgcn(cfg)
        program: Any = next(iter(learner.programs.values()))  # the LP-GCN client shard
        g_u = torch.ones(len(program.clients), cfg.settings.dim, dtype=torch.float32).cumsum(1)
        a, b = (np.asarray(program._literal_w_gradients(g_u).value)[:, : cfg.settings.dim] for _ in range(2))
        return a, b, program.state.held_virtual

    a, b, virtual = twice()
    assert virtual.any() and np.array_equal(a[~virtual], b[~virtual])  # real rows: no randomness
    assert not np.isclose(a[virtual], b[virtual]).any()
    a, b, virtual = twice("reproducible=true")
    assert virtual.any() and np.array_equal(a, b)


# ---------------------------------------------------------------------- round-based baselines
def _round(cfg: TrainConfig, phase: str) -> list[np.ndarray]:
    learner = ProtocolLearner(cfg, prepare_interactions(cfg))
    learner.train_round(0)
    return _server_view(learner, phase)


def test_fedncf_negatives_differ_between_runs_unless_reproducible() -> None:
    """The query is positives ∪ negatives: seeded negatives let whoever has the seed split them."""
    sets = ("clients_per_round=6", "n_negatives=6", "local_steps=1")
    a, b = (_round(_cfg("fedncf", *sets), "train/query") for _ in range(2))
    assert not _same(a, b)
    a, b = (_round(_cfg("fedncf", *sets, "reproducible=true"), "train/query") for _ in range(2))
    assert _same(a, b)


def test_fedpergnn_pseudo_items_differ_between_draws_unless_seeded() -> None:
    """The same local result, protected twice: fresh pseudo items each time from the CSPRNG."""
    clients, d = np.array([3, 8]), 4
    items = np.array([0, 1, 2, 5, 6, 7])
    res = LocalResult(
        torch.zeros(2, d), np.repeat([0, 1], 3), items, torch.ones(6, d, dtype=torch.float64), 0.0
    )
    opts = {"seed": 1, "n_pseudo": 5, "ldp_clip": 0.0, "ldp_scale": 0.0, "secure_noise": False}

    def pseudo(secure: bool) -> np.ndarray:
        _, got, _ = protected_rows(res, clients, 60, 0, **opts, secure_cover=secure)  # type: ignore[arg-type]
        return np.setdiff1d(got, items)

    assert np.array_equal(pseudo(False), pseudo(False))
    assert not np.array_equal(pseudo(True), pseudo(True))


def test_fedpergnn_pseudo_items_and_noise_differ_between_runs_unless_reproducible() -> None:
    sets = ("clients_per_round=6", "n_negatives=4", "local_steps=1", "n_pseudo=3", "local_graph=false")
    phase = "train/upload/plain-upload"
    a, b = (_round(_cfg("fedpergnn", *sets, model="mf"), phase) for _ in range(2))
    assert not _same(a, b)
    # the pseudo items alone (noise off, seeded init) still differ: they are cover, not noise
    quiet = (*sets, "ldp_scale=0", "secure_init=false")
    a, b = (_round(_cfg("fedpergnn", *quiet, model="mf"), phase) for _ in range(2))
    assert not _same(a, b)
    # the noise alone (everything else seeded) differs too
    noisy = (*sets, "reproducible=true", "secure_noise=true")
    a, b = (_round(_cfg("fedpergnn", *noisy, model="mf"), phase) for _ in range(2))
    assert not _same(a, b)
    a, b = (_round(_cfg("fedpergnn", *sets, "reproducible=true", model="mf"), phase) for _ in range(2))
    assert _same(a, b)
