"""Everything Flower: the ServerApp / ClientApp, the Flower learner, a local SuperLink for tests.

``app`` and ``client`` are the entry points ``deploy/flower/pyproject.toml`` names. Any protocol
registered as party programs runs through ``party_app`` (the ServerApp running ``train``'s loop with
``learner``'s :class:`~.learner.FlowerLearner`; ``simulate`` and ``deploy``) and ``node`` (the
SuperNodes' generic ``query.party`` handler). ``local`` starts a loopback federation. Its message
records and secure-aggregation stages live in :mod:`fedgraphrec.runtime.flower`. May import every
layer up to :mod:`fedgraphrec.training`.
"""
