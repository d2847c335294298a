"""FedPerGNN's names both roles share: roles, stages, ledger phases, part names and kinds.

The stages of one run, in order (one :meth:`~fedgraphrec.runtime.transport.Transport.round` each):

1. ``setup/keys`` — every client makes an X25519 key pair and sends its public key (``expand`` and
   ``real``/``accounted`` alike: the bytes are booked in both modes).
2. ``setup/wrap`` — the key holder (client 0) draws the clients' token key :math:`S` and wraps it
   for every client; the server only relays public keys and wrapped keys.
3. ``setup/unwrap`` — every client unwraps :math:`S` (and checks it got the same one).
4. ``setup/expand`` — every client sends the third party its item tokens and its embedding
   (pseudonymous); every node names its clients with at least one item (who may be sampled).
5. per round ``train/query`` — the sampled clients get their neighbours' mean embeddings from the
   third party, draw their negatives and ask the server for the rows of the items they query.
6. per round ``train/local`` — they get the rows, run ``τ`` local Adam steps, upload their
   (pseudo-item-padded, clipped, noised) item updates to the server and refresh their embedding at
   the third party.
7. ``predict`` — every client gets its neighbours (third party) and the item table (server) and
   computes its local GNN's :math:`h_u` for evaluation.

Steps 1–3 only run when local graphs are expanded (the tokens need :math:`S`).
"""

from __future__ import annotations

__all__ = [
    "CLIENT",
    "KEY_HOLDER",
    "PH_DOWNLOAD",
    "PH_EXPAND_UPLOAD",
    "PH_NEIGHBOURS",
    "PH_PREDICT_ITEMS",
    "PH_PREDICT_NEIGHBOURS",
    "PH_PUBLIC_KEYS",
    "PH_QUERY",
    "PH_REFRESH",
    "PH_UPLOAD",
    "PH_WRAPPED_KEY",
    "SERVER",
    "ST_EXPAND",
    "ST_KEYS",
    "ST_LOCAL",
    "ST_PREDICT",
    "ST_QUERY",
    "ST_UNWRAP",
    "ST_WRAP",
    "THIRD_PARTY",
]

# roles
CLIENT = "client"
SERVER = "server"
THIRD_PARTY = "third-party"
KEY_HOLDER = "key-client"

# stages (the client program's ``stage_<name>`` methods)
ST_KEYS = "setup/keys"
ST_WRAP = "setup/wrap"
ST_UNWRAP = "setup/unwrap"
ST_EXPAND = "setup/expand"
ST_QUERY = "train/query"
ST_LOCAL = "train/local"
ST_PREDICT = "predict"

# ledger phases (the training ones are the names the protocol has always booked)
PH_PUBLIC_KEYS = "setup/public-keys"
PH_WRAPPED_KEY = "setup/wrapped-key"
PH_EXPAND_UPLOAD = "setup/expand-upload"
PH_REFRESH = "train/expand-refresh"
PH_NEIGHBOURS = "train/expand-download"
PH_QUERY = "train/query"
PH_DOWNLOAD = "train/download"
PH_UPLOAD = "train/upload/plain-upload"
PH_PREDICT_NEIGHBOURS = "predict/expand-download"
PH_PREDICT_ITEMS = "predict/items"

# part names in messages
P_PUBLIC_KEYS = "public_keys"
P_WRAPPED = "wrapped_keys"
P_EXPAND = "expand"
P_NEIGHBOURS = "neighbours"
P_QUERY = "query"
P_DOWNLOAD = "download"
P_UPLOAD = "upload"
P_REFRESH = "refresh"
P_ITEMS = "items"

# message kinds (transcripts)
K_PUBLIC_KEY = "public_key"
K_WRAPPED_KEY = "wrapped_key"
K_TOKENS = "item-tokens-and-embedding"
K_NEIGHBOURS = "neighbour-embeddings"
K_QUERY = "item-ids"
K_DOWNLOAD = "item-rows"
K_UPLOAD = "plain-upload"
K_REFRESH = "user-embedding"
K_ITEMS = "item_embedding"

# public fields
F_ACTIVE = "active"
F_CLIENTS = "clients"
F_ROUND = "round"
F_LOSS = "loss_sum"
