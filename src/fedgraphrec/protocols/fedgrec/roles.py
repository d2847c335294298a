"""Names both FedGRec roles share: stages (one transport round each), parts, kinds and ledger phases.

Algorithm 1's phases on the wire, in order:

* set-up — ``setup/enroll`` (each node names its clients that hold training items; public);
* warm-up (lines 2–9) — the secure sum of ``Y_u`` (Eq. 9, phase ``warmup/degrees``), the degree
  broadcast ``warmup/degrees``, then for ``k = 1..K`` the table download ``warmup/download`` and
  the secure sum of Eq. 7's contributions (phase ``warmup/propagate``, Eq. 8);
* a round (lines 10–24) — Step 1 ``train/query`` (item ids up), Steps 2–3 ``train/download``
  (rows down; the nodes train locally), Step 4 the secure sum ``train/upload``;
* evaluation — ``predict`` (the tables down once per node; users refresh their latents).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEGREES",
    "ENROLL",
    "PREDICT",
    "PROPAGATE",
    "QUERY",
    "ROUND_DOWNLOAD",
    "UPLOAD",
    "WARMUP_DOWNLOAD",
    "session",
]

ENROLL: Final = "setup/enroll"
"""Stage: each node names its clients with training items (who can be sampled)."""
DEGREES: Final = "warmup/degrees"
"""Phase of Eq. 9's secure sum, and stage/phase of the broadcast of its result ``|N_t|``."""
WARMUP_DOWNLOAD: Final = "warmup/download"
"""Stage/phase: the table ``E^{k-1}`` down to every user (Eq. 6)."""
PROPAGATE: Final = "warmup/propagate"
"""Phase of Eq. 7–8's secure sum (``E^k``)."""
QUERY: Final = "train/query"
"""Stage/phase of Step 1: each sampled user's item ids (positives, then negatives) up."""
ROUND_DOWNLOAD: Final = "train/download"
"""Stage/phase of Steps 2–3: the queried rows of every order down; the users train locally."""
UPLOAD: Final = "train/upload"
"""Phase of Step 4's secure sum."""
PREDICT: Final = "predict"
"""Stage: the tables down once per node; each user's representation for evaluation."""
PREDICT_PHASE: Final = "predict/items"
"""Phase of the prediction download (one message per node)."""


def session(what: str, index: int | None = None) -> str:
    """The secure-aggregation session label (``fedgrec/warmup/degrees``, ``fedgrec/round/3``...)."""
    return f"fedgrec/{what}" if index is None else f"fedgrec/{what}/{index}"
