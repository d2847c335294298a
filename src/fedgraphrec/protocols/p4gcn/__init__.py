"""P4GCN: vertical two-party social recommendation with sandwich encryption and matrix-Gaussian DP.

Roles: :class:`~.recommender.Recommender` (``P1``) and :class:`~.social.SocialParty` (``P2``), wired by
:class:`~.protocol.P4GCN` through the runtime network (spec ``p4gcn.md``).
"""

from fedgraphrec.protocols.p4gcn.protocol import P4GCN, P4GCNConfig, batch_schedule, release_count
from fedgraphrec.protocols.p4gcn.recommender import Recommender
from fedgraphrec.protocols.p4gcn.social import SocialParty

__all__ = ["P4GCN", "P4GCNConfig", "Recommender", "SocialParty", "batch_schedule", "release_count"]
