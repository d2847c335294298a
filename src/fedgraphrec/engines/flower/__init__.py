"""Everything Flower: the ServerApp / ClientApp, the job description, a local SuperLink for tests.

``app`` and ``client`` are the entry points ``deploy/flower/pyproject.toml`` names; ``job`` is the run
configuration; ``lpgcn`` drives LP-GCN's client shards; ``local`` starts a loopback federation. Its
message records and secure-aggregation stages live in :mod:`fedgraphrec.runtime.flower`. May import
every layer up to :mod:`fedgraphrec.training`.
"""
