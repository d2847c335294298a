"""Names both GNN4FR roles share: roles, stages, ledger phases, part names, and the item-token codec.

A stage is one :meth:`~fedgraphrec.runtime.transport.Transport.round` (the client program's
``stage_<name>`` answers it); a phase is the ledger and transcript name of the messages it carries,
bound into every sealed message. Phase names are the ones the whole-table implementation booked, so
ledgers stay comparable across versions.
"""

from __future__ import annotations

import numpy as np

from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.crypto.tokens import TOKEN_BYTES, ItemTokenizer
from fedgraphrec.seeding import numpy_rng

__all__ = [
    "CLIENT",
    "HOLDER_OF_ITEM",
    "KEY_HOLDER",
    "SERVER",
    "Phase",
    "Stage",
    "item_tokens",
    "key_client_of",
    "token_ints",
]

SERVER = "server"
CLIENT = "client"
KEY_HOLDER = "key-client"
"""u_c of Algorithm 2: the client that draws the shared key S and wraps it for everybody."""
HOLDER_OF_ITEM = "holder-of-item"
"""Sender name bound into an item's row when receivers know the row by item, not by sender."""


class Stage:
    """Stage names (one round each), in schedule order."""

    PUBLIC_KEYS = "setup/public-keys"
    WRAP_KEY = "setup/wrap-key"
    UNWRAP_KEY = "setup/unwrap-key"
    CATALOGUE = "setup/catalogue"
    ROUTING = "setup/routing"
    BEGIN = "step/begin"
    FORWARD = "step/forward"
    NEGATIVES = "step/negatives"
    LOSS = "step/loss"
    GRADIENTS = "step/gradients"
    BACKWARD = "step/backward"
    UPLOAD = "step/upload"
    UPDATE = "step/update"
    PREDICT_ITEMS = "predict/items"
    PREDICT_DELIVER = "predict/deliver"
    EVALUATE = "evaluate"


class Phase:
    """Ledger phases (also bound into sealed messages)."""

    PUBLIC_KEYS = "setup/public-keys"
    WRAPPED_KEY = "setup/wrapped-key"
    ITEM_TOKENS = "setup/item-tokens"
    CATALOGUE = "setup/catalogue"
    NEIGHBOURS = "setup/neighbours"
    NEGATIVE_REQUESTS = "loss/negative-requests"
    NEGATIVE_EMBEDDINGS = "loss/negative-embeddings"
    NEGATIVE_GRADIENTS = "loss/negative-gradients"
    ITEM_GRADIENTS = "loss/item-gradients"
    ITEM_GRADIENT_TOKENS = "loss/item-gradient-tokens"
    SHARES = "aggregate/shares"
    UPLOADS = "aggregate/uploads"
    SUM = "aggregate/sum"
    PREDICT_ITEMS = "predict/item-embeddings"

    @staticmethod
    def forward(layer: int, prefix: str = "forward") -> str:
        """Layer-``layer`` user embeddings to the neighbours (Algorithm 4)."""
        return f"{prefix}/l={layer}/user-embeddings"

    @staticmethod
    def neighbour_gradients(layer: int) -> str:
        """Paper-literal Algorithm 5: per-pair gradients of the layer-``layer - 1`` neighbour rows."""
        return f"backward/l={layer}/neighbour-gradients"

    @staticmethod
    def user_gradients(layer: int) -> str:
        """Transposed backward: a user's layer-``layer`` gradient to its neighbours."""
        return f"backward/l={layer}/user-gradients"


def key_client_of(n_users: int, seed: int) -> int:
    """u_c of Algorithm 2, drawn from the public ``setup`` stream of the run seed.

    Which client draws S hides nothing (it is a role, announced to the key-client); both roles
    compute it, so a node refuses a server that asks another client, or a second one, to wrap S.
    """
    return int(numpy_rng(seed, "gnn4fr", "setup").integers(0, n_users))


def item_tokens(key: SharedKey | None, items: np.ndarray) -> list[bytes]:
    """The 16-byte tokens of ``items`` under S; without S (``accounted`` mode) a stand-in per id.

    The stand-in is the id (big-endian int64) padded to 16 bytes, so both modes move tokens of the
    same size and the server groups them the same way (:func:`token_ints`).
    """
    ids = np.asarray(items, dtype=np.int64)
    if key is not None:
        return ItemTokenizer(key).tokens(ids)
    raw = np.zeros((len(ids), 2), dtype=">i8")
    raw[:, 0] = ids
    flat = raw.tobytes()
    return [flat[k : k + TOKEN_BYTES] for k in range(0, len(flat), TOKEN_BYTES)]


def token_ints(tokens: list[bytes]) -> np.ndarray:
    """The first 8 bytes of each token as a signed big-endian int64 (the server's grouping handle)."""
    if not tokens:
        return np.zeros(0, dtype=np.int64)
    return np.frombuffer(b"".join(tokens), dtype=">i8").reshape(len(tokens), 2)[:, 0].astype(np.int64)
