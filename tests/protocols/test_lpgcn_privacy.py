"""What the LP-GCN server receives in ``real`` mode: ciphertexts, never user data in the clear."""

import numpy as np
import pytest
import torch

from fedgraphrec.crypto import IntegrityError
from fedgraphrec.protocols.lpgcn.protocol import LPGCN
from fedgraphrec.runtime import Network, encode_tensor
from fedgraphrec.runtime.transcript import payload_bytes
from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import random_train

PLAINTEXT_KINDS_ALLOWED = {"public_key", "item_embedding", "item_gradient", "item_degree"}


def make(alpha=3, n_users=14, n_items=16):
    train = random_train(n_users=n_users, n_items=n_items, density=0.3, seed=8)
    gen = torch.Generator().manual_seed(1)
    u0 = torch.randn(n_users, 4, generator=gen, dtype=torch.float64)
    v0 = torch.randn(n_items, 4, generator=gen, dtype=torch.float64)
    return train, LPGCN(train, u0, v0, n_layers=2, alpha=alpha, seed=2, crypto="real", transcripts=True)


def test_server_transcript_holds_no_plaintext_user_data():
    train, fed = make()
    user_rows_seen = []
    for users, pos, neg in BPRSampler(train, seed=0).batches(0, 10):
        rec = fed.train_step(users, pos, neg, keep_layers=True)
        user_rows_seen += [layer for layer in rec.user_layers]
    entries = fed.net.transcript.of("server")
    assert entries, "transcripts were not recorded"
    kinds = {e.kind for e in entries}
    assert {"user_embedding", "user_gradient", "item_token", "virtual_flag"} <= kinds
    # every protected message the server got carries its payload (nothing merely counted as
    # protected), each opaque bytes of exactly the accounted size; plaintext ones are item-level
    # or public keys only
    for role in fed.net.transcript.roles():
        for e in fed.net.transcript.of(role):
            if e.protected:
                assert e.sizes is not None and len(e.payloads) == len(e.sizes) > 0, (role, e.phase)
                assert [len(payload_bytes(p)) for p in e.payloads] == list(e.sizes), (role, e.phase)
    for e in entries:
        if e.protected:
            assert all(isinstance(p, bytes) for p in e.payloads), e.phase
        else:
            assert e.kind in PLAINTEXT_KINDS_ALLOWED or e.phase == "loss/item-gradients", (e.phase, e.kind)
    blobs = b"".join(p for e in entries for p in e.payloads if isinstance(p, bytes))
    # no user embedding row of any layer appears in its encoded form inside anything the server got
    for layer in user_rows_seen:
        for u in range(layer.shape[0]):
            assert encode_tensor(layer[u : u + 1]) not in blobs
    # no item id appears as a plaintext token: the uploads are HMAC tokens, 16 bytes per held item
    uploads = next(e for e in entries if e.phase == "setup/item-tokens").payloads
    held = np.diff((fed.topology.real + fed.topology.virtual).tocsr().indptr)
    assert [len(p) for p in uploads] == (16 * held).tolist()
    chunks = {p[k : k + 16] for p in uploads for k in range(0, len(p), 16)}
    held_items = np.unique((fed.topology.real + fed.topology.virtual).tocoo().col)
    assert len(chunks) == len(held_items)  # deterministic: one token per distinct item
    plain_ids = {int(i).to_bytes(16, order) for i in held_items for order in ("little", "big")}
    assert not chunks & plain_ids, "an item id was uploaded in the clear"
    # the virtual/real flags travel sealed: same length whatever the answer, no two ciphertexts equal
    answers = [p for e in entries if e.kind == "virtual_flag" for p in e.payloads]
    assert len({len(a) for a in answers}) == 1 and len(set(answers)) == len(answers)


def test_a_flipped_ciphertext_byte_is_rejected(monkeypatch):
    train, fed = make()
    original = Network.transmit

    def tamper(self, phase, sender, receiver, sizes, **kw):
        delivered = original(self, phase, sender, receiver, sizes, **kw)
        if phase.startswith("forward/l=1/user-embeddings") and receiver == "conv-client" and delivered:
            blob = bytearray(delivered[0])
            blob[len(blob) // 2] ^= 0x01
            delivered = [bytes(blob), *delivered[1:]]
        return delivered

    monkeypatch.setattr(Network, "transmit", tamper)
    users, pos, neg = next(BPRSampler(train, seed=0).batches(0, 10))
    with pytest.raises(IntegrityError, match="forward/l=1/user-embeddings"):
        fed.train_step(users, pos, neg)


def test_secret_cover_is_not_reproducible_from_the_seed_and_changes_no_number():
    """With secure virtual items the cover differs between two runs of one seed; training is equal."""
    from fedgraphrec.protocols.lpgcn.setup import sample_virtual_items

    train = random_train(n_users=30, n_items=40, density=0.1, seed=1)
    seeded = [sample_virtual_items(train, 4, seed=3).toarray() for _ in range(2)]
    secret = [sample_virtual_items(train, 4, seed=3, secret=True).toarray() for _ in range(2)]
    assert (seeded[0] == seeded[1]).all()
    assert not (secret[0] == secret[1]).all()
    for v in secret:  # still α distinct non-held items per client
        assert (v.sum(1) == 4).all() and not (v * train.toarray()).any()
    g = torch.Generator().manual_seed(0)
    u0 = torch.randn(30, 4, generator=g, dtype=torch.float64)
    v0 = torch.randn(40, 4, generator=g, dtype=torch.float64)
    a = LPGCN(train, u0, v0, n_layers=2, alpha=4, seed=2, secret_cover=True)
    b = LPGCN(train, u0, v0, n_layers=2, alpha=4, seed=2)
    for users, pos, neg in BPRSampler(train, seed=0).batches(0, 16):
        assert a.train_step(users, pos, neg).loss == b.train_step(users, pos, neg).loss
    assert torch.equal(a.item_emb, b.item_emb)
