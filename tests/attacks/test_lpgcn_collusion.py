"""LP-GCN: a server with c colluding clients vs α virtual items (measured leakage, not the claim)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedgraphrec.attacks.lpgcn_collusion import lpgcn_collusion
from fedgraphrec.protocols.lpgcn.client import key_material
from tests.helpers import random_train
from tests.protocols.lpgcn_world import World, world


def _setup(alpha: int) -> tuple[World, Any]:
    train = random_train(n_users=20, n_items=40, density=0.15, seed=3)
    tables = {"user_emb": torch.zeros(20, 2), "item_emb": torch.zeros(40, 2)}
    return world(train, tables, n_layers=1, alpha=alpha, seed=4, crypto="real", transcripts=True), train


def _attack(alpha: int, colluders: list[int]) -> dict[str, float]:
    w, train = _setup(alpha)
    key, pairs = key_material(w.programs.values(), 20)
    res = lpgcn_collusion(w.net.transcript, train, colluders, key if colluders else None, pairs)
    return res.summary()


def test_without_any_client_the_server_is_left_with_a_random_guess() -> None:
    s = _attack(alpha=5, colluders=[])
    assert s["mean_auc"] == 0.5 and s["mean_recovered"] == 0.0
    assert s["mean_precision"] == s["mean_random_precision"]


def test_the_server_cannot_regenerate_the_tokens_from_the_seed_or_the_ids() -> None:
    """Without S the tokens are opaque: two set-ups with the same seed share no token, and no token
    is an item id or a hash of one. (Were S, or the tokens, derived from the run seed, the server
    could rebuild the id dictionary from config.toml and the guess above would not be random.)"""
    import hashlib

    def tokens() -> set[bytes]:
        w, _ = _setup(alpha=5)
        uploads = [
            p for e in w.net.transcript.of("server") if e.phase == "setup/item-tokens" for p in e.payloads
        ]
        return {p[k : k + 16] for p in uploads for k in range(0, len(p), 16)}

    first, second = tokens(), tokens()
    assert len(first) > 30 and not first & second
    guesses = {h(i) for i in range(40) for h in (
        lambda i: int(i).to_bytes(16, "little"),
        lambda i: hashlib.sha256(str(i).encode()).digest()[:16],
        lambda i: hashlib.sha256(int(i).to_bytes(8, "little")).digest()[:16],
    )}  # fmt: skip
    assert not first & guesses


def test_one_client_with_s_breaks_the_tokens_and_alpha_zero_gives_everything() -> None:
    s = _attack(alpha=0, colluders=[0])
    assert s["mean_held_precision"] == 1.0 and s["mean_recall"] == 1.0 and s["mean_auc"] > 0.99


def test_virtual_items_dilute_one_colluder_and_verification_undoes_it() -> None:
    one = _attack(alpha=8, colluders=[0])
    assert one["mean_held_precision"] < 0.6  # real items drown among virtual ones
    assert one["mean_recall"] == 1.0  # but every real item is in the held set
    assert one["mean_auc"] > 0.8  # held vs not held already ranks far above random
    w, _ = _setup(alpha=8)
    conv = sorted({int(c) for p in w.programs.values() for c in p.state.conv_owner})
    every_conv = _attack(alpha=8, colluders=conv)  # every convolution-client (the seed fixes the cover)
    assert every_conv["mean_recovered"] > one["mean_recovered"]
    assert every_conv["mean_precision"] > one["mean_precision"]


def test_verification_answers_decode_to_the_truth() -> None:
    w, train = _setup(alpha=4)
    conv = sorted({int(c) for p in w.programs.values() for c in p.state.conv_owner})
    key, pairs = key_material(w.programs.values(), 20)
    res = lpgcn_collusion(w.net.transcript, train, conv, key, pairs)
    # every convolution-client colludes: each victim edge is verified, so the recovery is exact
    assert len(res.victims) == 20 - len(conv) > 0
    np.testing.assert_array_equal(res.precision, 1.0)
    np.testing.assert_array_equal(res.recall, 1.0)
    np.testing.assert_array_equal(res.recovered, 1.0)
