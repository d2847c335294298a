"""Privacy audits that read what a party actually received (runtime transcripts).

* :func:`query_intersection` — FedGRec's server intersects each user's queried item sets across
  rounds: positives are in every query, negatives are resampled, so the intersection converges to
  the user's private interactions (spec ``fedgrec.md`` §1.4, implementer note).
* :func:`upload_inference` — the server reads users' item updates: without secure aggregation the
  update's rows give the items away; with it the server holds uniform ring vectors.
* :func:`lpgcn_collusion` — LP-GCN's server with c colluding clients (who hold S) decodes item
  tokens and opens the colluders' verification answers.
* :func:`gnn4fr_neighbour` — a GNN4FR neighbour (who holds S) reads the sender's items off the
  layer-1 user embedding it receives.
* :func:`private_item_hits` — a DGREC neighbour ranks items by the rows of a received gradient:
  plain gradients give private items away, one-bit encodings hide them.
* :func:`p4gcn_link` — P4GCN's recommender, who decrypts every sandwich, infers the social party's
  links: exact without DP noise, a random guess with it.
"""
