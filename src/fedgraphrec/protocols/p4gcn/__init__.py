"""P4GCN: vertical two-party social recommendation with sandwich encryption and matrix-Gaussian DP.

Two organisations as party programs over :class:`~fedgraphrec.runtime.transport.Transport` (spec
``p4gcn.md`` §4.5): the recommender ``P1`` (:mod:`.recommender_program`, its model in
:mod:`.recommender`) and the social platform ``P2`` (:mod:`.social_program`, its sandwiches and noise
in :mod:`.social`), joined by a coordinator that holds no data (:mod:`.server`). Names they share are
in :mod:`.roles`, the wire form of HE matrices in :mod:`.wire`, the schedule in :mod:`.schedule`, the
settings in :mod:`.settings`; :mod:`.driver` runs the three in one process.
"""
