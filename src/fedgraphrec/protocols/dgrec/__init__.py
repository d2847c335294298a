"""DGREC: decentralised hypergraph recommender with one-bit LDP gradient flooding (spec ``dgrec.md``).

Modules: :mod:`.sampling` (Algorithm 1), :mod:`.gossip` (the users' peer programs: public items and
Algorithm 2's flooding), :mod:`.hypergraph` (per-user inner-item hypergraphs), :mod:`.model` (batched
per-user local models), :mod:`.settings` (:class:`DGRECSettings`, the variants), :mod:`.trainer` (one
epoch of group steps, sharing modes and ablation switches).
"""
