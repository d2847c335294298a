"""Names both roles of secure aggregation share: stages, parts, message kinds and ledger phases.

A protocol runs a secure sum under its own phase prefix (``"train/upload"``); every stage's
messages are booked under ``<prefix>/<suffix>`` with the suffixes below (the names the ledger has
always used), all derived from the one stage vocabulary of :mod:`fedgraphrec.crypto.secagg.wire`,
and each stage is one transport round answered by the client method
``stage_secagg_<name>`` (:class:`~fedgraphrec.protocols.secagg.client.SecureSumClient`).
"""

from __future__ import annotations

from typing import Final

from fedgraphrec.crypto.secagg import wire

__all__ = [
    "ADVERTISE",
    "KINDS",
    "MASK",
    "PART",
    "PLAIN",
    "SHARE",
    "STAGE",
    "SUFFIX",
    "UNMASK",
]

ADVERTISE: Final = f"secagg/{wire.ADVERTISE}"
"""Stage 0: each client's two public keys up."""
SHARE: Final = f"secagg/{wire.SHARE}"
"""Stage 1: the roster down; each client's encrypted Shamir shares up."""
MASK: Final = f"secagg/{wire.MASK}"
"""Stage 2: the shares forwarded to their holders and ``U2`` down; masked inputs up."""
UNMASK: Final = f"secagg/{wire.UNMASK}"
"""Stage 3: the survivors ``U3`` down; the revealed shares up."""
PLAIN: Final = "secagg/plain"
"""The unprotected baseline (privacy audits): every client's rows up, in the clear."""

STAGE: Final = {ADVERTISE: wire.ADVERTISE, SHARE: wire.SHARE, MASK: wire.MASK, UNMASK: wire.UNMASK}
"""The vocabulary's stage (:data:`fedgraphrec.crypto.secagg.wire.STAGES`) of each transport stage."""

SUFFIX: Final = {
    **{stage: f"secagg-{wire.STAGE_TITLE[name]}" for stage, name in STAGE.items()},
    PLAIN: "plain-upload",
}
"""Ledger phase suffix of each stage's messages (``<prefix>/<suffix>``)."""

KINDS: Final = {stage: suffix for stage, suffix in SUFFIX.items()}
"""Message kind of each stage's payloads (transcripts and audits read these)."""

PART: Final = {
    "adverts": "adverts",  # client -> server: AdvertisedKeys
    "roster": "roster",  # server -> client: every advertised key, one copy per client
    "shares": "shares",  # client -> server -> client: presealed share messages
    "survivors": "survivors",  # server -> client: U3
    "masked": "masked",  # client -> server: masked inputs (or their sum, accounted)
    "reveal": "reveal",  # client -> server: shares of self masks / dropped clients' keys
    "upload": "upload",  # client -> server: plain rows (baseline)
}
"""Part names inside the stages' messages."""
