"""FedGRec: federated graph recommendation with lazy latent embeddings (spec ``fedgrec.md``).

Algorithm 1: warm-up (lines 2–9) is :meth:`FedGRec.warm_up`; a training round (lines 10–24) is
:meth:`FedGRec.train_round`, Step 1's draws are in :mod:`.sampling`, Step 4's secure aggregation is
:func:`fedgraphrec.protocols.secure_aggregation.secure_aggregate` over
:mod:`fedgraphrec.crypto.secagg`.
"""

from fedgraphrec.protocols.fedgrec.protocol import FedGRec, RoundRecord
from fedgraphrec.protocols.fedgrec.sampling import RoundSample, sample_round
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings

__all__ = ["FedGRec", "FedGRecSettings", "RoundRecord", "RoundSample", "sample_round"]
