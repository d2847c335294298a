"""Role and phase names of P4GCN, shared by code, ledger and logs (spec ``p4gcn.md`` §4.5)."""

RECOMMENDER = "recommender"  # P1: ratings, every trainable parameter, the HE key pair
SOCIAL = "social"  # P2: the social graph, frozen W1, the DP noise

PH_SETUP_X = "setup/x"  # [X] once (N d ciphertexts)
PH_IDS = "iter/1-batch-ids"  # plaintext ids of the distinct batch users
PH_FWD = "iter/2-forward"  # [Y_B]
PH_GRAD = "iter/3-gradient"  # [G]
PH_BWD = "iter/4-backward"  # [Δ_B]
PH_SYNC = "iter/5-resync"  # re-clipped, re-encrypted [X_B]
PH_EVAL = "eval/forward"  # the final all-user release

CIPHER_PHASES = (PH_SETUP_X, PH_FWD, PH_GRAD, PH_BWD, PH_SYNC)

__all__ = [
    "CIPHER_PHASES",
    "PH_BWD",
    "PH_EVAL",
    "PH_FWD",
    "PH_GRAD",
    "PH_IDS",
    "PH_SETUP_X",
    "PH_SYNC",
    "RECOMMENDER",
    "SOCIAL",
]
