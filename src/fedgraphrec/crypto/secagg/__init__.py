"""Secure aggregation's cryptography (Bonawitz et al., CCS 2017), without any transport.

``wire.py`` holds the protocol description, the stage vocabulary, every size on the wire and what
both sides derive alike; ``client.py`` one client's state machine (:class:`SecAggClient`),
``server.py`` the server's (:class:`SecAggServer`). The stages run as transport rounds in
:mod:`fedgraphrec.protocols.secagg`.
"""
