"""Secure aggregation as party stages over the transport (Bonawitz et al., CCS 2017).

:func:`~fedgraphrec.protocols.secagg.server.secure_sum` is the server side (four
:meth:`Transport.round <fedgraphrec.runtime.transport.Transport.round>` calls with dropout
recovery); :class:`~fedgraphrec.protocols.secagg.client.SecureSumClient` is the client side a
protocol's client program mixes in, computing its inputs on its node. ``roles.py`` holds the stage,
part and phase names both share; ``upload.py`` the sparse inputs and their fixed-point encodings;
``policy.py`` the one threshold rule and what a client requires; ``expect.py`` what a node accepts.
This is the one secure aggregation: :func:`secure_sum` its one entry point, :class:`SumResult` its
one result. The cryptography itself is the package :mod:`fedgraphrec.crypto.secagg`.
"""

from fedgraphrec.protocols.secagg.client import SecAggState, SecureSumClient
from fedgraphrec.protocols.secagg.policy import check_threshold, threshold_for
from fedgraphrec.protocols.secagg.server import SumResult, plain_sum, secure_sum
from fedgraphrec.protocols.secagg.upload import SparseUpload

__all__ = [
    "SecAggState",
    "SecureSumClient",
    "SparseUpload",
    "SumResult",
    "check_threshold",
    "plain_sum",
    "secure_sum",
    "threshold_for",
]
