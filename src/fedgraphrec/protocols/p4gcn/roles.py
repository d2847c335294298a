"""Names the P4GCN parties share: roles, node ids, stages and ledger phases (spec ``p4gcn.md`` §4.5).

Two organisations run P4GCN: the recommender ``P1`` (ratings, every trainable parameter, the HE key
pair) and the social platform ``P2`` (the social graph, the frozen ``W1``, the DP noise). They talk
through a coordinator that holds no data (:mod:`.server`): it asks each organisation for the next
message of Algorithm 1 and relays it to the other. A *phase* names one of the paper's messages (the
ledger and the transcripts use it); a *stage* is one round between the coordinator and one
organisation (the organisation's program answers it with its ``stage_<name>`` method).

Messages (spec §4.5, one training iteration ``t`` on the batch users ``B``):

* set-up — ``[X / s_x]`` of every user, ``P1 → P2`` (phase :data:`PH_SETUP_X`);
* 1 — the plaintext ids of ``B``, ``P1 → P2`` (:data:`PH_IDS`; public, spec §1.4);
* 2 — ``[(B L̃)[X] W1 + E_fwd]``, ``P2 → P1`` (:data:`PH_FWD`);
* 3 — ``[G]``, ``P1 → P2`` (:data:`PH_GRAD`);
* 4 — ``[(B L̃ Bᵀ)[G] W1ᵀ + E_bwd]``, ``P2 → P1`` (:data:`PH_BWD`);
* 5 — the re-clipped, re-encrypted ``[X_B]``, ``P1 → P2`` (:data:`PH_SYNC`, assumption A3);
* the evaluation release (§4.6) — one noisy forward for every user, in chunks (:data:`PH_EVAL`).
"""

from __future__ import annotations

from typing import Final

RECOMMENDER: Final = "recommender"  # P1: ratings, every trainable parameter, the HE key pair
SOCIAL: Final = "social"  # P2: the social graph, frozen W1, the DP noise
ORGANISATIONS: Final = (RECOMMENDER, SOCIAL)
"""The two organisations, in node order: the recommender is node 0, the social platform node 1."""
NODE_OF: Final = {RECOMMENDER: 0, SOCIAL: 1}
"""The node id of each organisation (in process; on Flower the node-config names the organisation)."""

PH_CONTEXT: Final = "setup/context"  # P1's public HE context, when P2 runs in another process
PH_SETUP_X: Final = "setup/x"  # [X] once (N d ciphertexts)
PH_IDS: Final = "iter/1-batch-ids"  # plaintext ids of the distinct batch users
PH_FWD: Final = "iter/2-forward"  # [Y_B]
PH_GRAD: Final = "iter/3-gradient"  # [G]
PH_BWD: Final = "iter/4-backward"  # [Δ_B]
PH_SYNC: Final = "iter/5-resync"  # re-clipped, re-encrypted [X_B]
PH_EVAL: Final = "eval/forward"  # the final all-user release

CIPHER_PHASES: Final = (PH_SETUP_X, PH_FWD, PH_GRAD, PH_BWD, PH_SYNC)

ST_HELLO: Final = "setup/hello"
"""Both organisations: each names the organisation it is (its node's configuration), nothing else."""

# Stages of the recommender P1 (one coordinator round each).
ST_KEYS: Final = "setup/keys"
"""P1 builds its model and key pair; answers the public plan and ``[X]`` (set-up message)."""
ST_IDS: Final = "iter/ids"
"""P1 draws the step's batch from its own schedule; answers message 1 (the batch user ids)."""
ST_LOCAL: Final = "iter/local"
"""P1 receives message 2, trains its local parameters; answers message 3 ``[G]`` and the loss."""
ST_UPDATE: Final = "iter/update"
"""P1 receives message 4, updates ``X_soc[B]``; answers message 5 ``[X_B]``."""
ST_ROWS: Final = "eval/rows"
"""P1 receives one chunk of the evaluation release."""
ST_EVALUATE: Final = "evaluate"
"""P1 scores held-out ratings (RMSE/MAE sums); only the recommender holds ratings."""

# Stages of the social platform P2.
ST_SETUP: Final = "setup/x"
"""P2 receives the plan and ``[X]`` and calibrates its noise to the plan's release count ``K``."""
ST_FORWARD: Final = "iter/forward"
"""P2 receives message 1; answers message 2."""
ST_BACKWARD: Final = "iter/backward"
"""P2 receives message 3 for the batch it forwarded; answers message 4."""
ST_RESYNC: Final = "iter/resync"
"""P2 receives message 5 for the batch it forwarded and replaces those rows of ``[X]``."""
ST_RELEASE: Final = "eval/release"
"""P2 answers one chunk of the evaluation release (every user exactly once over the chunks)."""
ST_REPORT: Final = "report"
"""P2 reports its privacy accounting (ε spent, the noise scale, where the noise came from)."""

__all__ = [
    "CIPHER_PHASES",
    "NODE_OF",
    "ORGANISATIONS",
    "PH_BWD",
    "PH_CONTEXT",
    "PH_EVAL",
    "PH_FWD",
    "PH_GRAD",
    "PH_IDS",
    "PH_SETUP_X",
    "PH_SYNC",
    "RECOMMENDER",
    "SOCIAL",
    "ST_BACKWARD",
    "ST_EVALUATE",
    "ST_FORWARD",
    "ST_HELLO",
    "ST_IDS",
    "ST_KEYS",
    "ST_LOCAL",
    "ST_RELEASE",
    "ST_REPORT",
    "ST_RESYNC",
    "ST_ROWS",
    "ST_SETUP",
    "ST_UPDATE",
]
