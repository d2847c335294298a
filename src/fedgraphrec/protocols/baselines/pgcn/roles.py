r"""P-GCN's names both roles share: stages (one transport round each), parts, kinds and ledger phases.

The stages of a run, in order:

1. ``setup/enroll`` — every node names its users with training items (who takes part in the forward).
2. set-up degrees — the secure sum of every user's item indicator ``Y_u`` (phase ``setup/degrees``)
   gives the item degrees :math:`|\mathcal U_i|`; the stage ``setup/degrees`` broadcasts them
   (every user needs them for its weights :math:`c_{ui}`).
3. per minibatch, per layer ``k = 0..L-1``: ``train/forward`` — the whole table :math:`V^{(k)}`
   (and at ``k = 0`` the whole ``W``) down to the users who need it (phase
   ``train/forward/download``); then the secure sum of every user's contribution
   :math:`c_{ui} U^{(k)}_u` (phase ``train/forward/propagate``), which is :math:`V^{(k+1)}`.
4. per minibatch ``train/local`` — :math:`V^{(L)}` (with ``L = 0`` also ``W``) down to the users
   with triples (phase ``train/local/download``); they compute their loss and their star backward.
5. per minibatch the secure sum of their gradient rows (phase ``train/item-gradients``, the name
   the ledger has always used); the server applies Adam to ``V`` and ``W``.
6. prediction: the same forward with every user (phases ``predict/forward/download`` and
   ``predict/forward/propagate``), then ``predict`` (with ``L = 0`` the table ``W`` down): every
   user combines its layers; the server holds the combined item table.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "CLIENT",
    "K_DEGREES",
    "K_ITEM_TABLE",
    "K_W_TABLE",
    "PH_DEGREES",
    "PH_GRADIENTS",
    "SERVER",
    "ST_DEGREES",
    "ST_ENROLL",
    "ST_FORWARD",
    "ST_LOCAL",
    "ST_PREDICT",
    "ST_PREDICT_FORWARD",
    "forward_phases",
    "session",
]

CLIENT: Final = "client"
SERVER: Final = "server"

# stages (the client program's ``stage_<name>`` methods)
ST_ENROLL: Final = "setup/enroll"
ST_DEGREES: Final = "setup/degrees"
ST_FORWARD: Final = "train/forward"
ST_LOCAL: Final = "train/local"
ST_PREDICT_FORWARD: Final = "predict/forward"
ST_PREDICT: Final = "predict"

# ledger phases
PH_DEGREES: Final = "setup/degrees"
"""Phase of the degrees' secure sum (prefix) and of their broadcast."""
PH_LOCAL_DOWNLOAD: Final = "train/local/download"
PH_GRADIENTS: Final = "train/item-gradients"
"""Phase prefix of the gradient uploads' secure sum (as the ledger has always booked it)."""
PH_PREDICT: Final = "predict/download"


def forward_phases(prefix: str) -> tuple[str, str]:
    """``(download phase, secure-sum phase prefix)`` of a forward under ``train`` or ``predict``."""
    return f"{prefix}/forward/download", f"{prefix}/forward/propagate"


# part names in messages
P_ITEMS: Final = "items"
P_W: Final = "item_w"
P_DEGREES: Final = "degrees"

# message kinds (transcripts)
K_ITEM_TABLE: Final = "item-table"
K_W_TABLE: Final = "w-table"
K_DEGREES: Final = "degrees"

# public fields
F_ACTIVE: Final = "active"
F_LAYER: Final = "k"
F_SESSION: Final = "session"
F_USERS: Final = "users"
F_POS: Final = "pos"
F_NEG: Final = "neg"
F_BATCH: Final = "batch"
F_BPR: Final = "bpr"
F_REG: Final = "reg"


def session(*parts: object) -> str:
    """A secure-aggregation session label: ``pgcn/step/3``, ``pgcn/train/3/layer/1``, ..."""
    return "/".join(["pgcn", *(str(p) for p in parts)])
