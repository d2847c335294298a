"""Secure aggregation as party stages over the transport (Bonawitz et al., CCS 2017).

The one secure aggregation of the library: ``server.py`` holds its one entry point
:func:`~fedgraphrec.protocols.secagg.server.secure_sum` (four
:meth:`Transport.round <fedgraphrec.runtime.transport.Transport.round>` calls with dropout
recovery) and its one result :class:`~fedgraphrec.protocols.secagg.server.SumResult`;
``client.py`` the client side a protocol's client program mixes in
(:class:`~fedgraphrec.protocols.secagg.client.SecureSumClient`), computing its inputs on its node;
``roles.py`` the stage, part and phase names both share; ``upload.py`` the sparse inputs and their
fixed-point encodings; ``policy.py`` the one threshold rule and what a client requires of a sum;
``expect.py`` what a node accepts in each stage. The cryptography itself is the package
:mod:`fedgraphrec.crypto.secagg`. Import from the modules (this package re-exports nothing).
"""
