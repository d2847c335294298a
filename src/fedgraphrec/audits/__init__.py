"""Audits: reports of what each party learns or can alter, built on :mod:`fedgraphrec.attacks`.

``report`` / ``graph`` (LP-GCN, GNN4FR, FedGRec attacks on transcripts, with the protection on and
off), ``p4gcn`` (the recommender's link inference against the DP budget), ``dgrec`` (what a neighbour
learns from one-bit uploads) and ``integrity`` (an active server's flips, replays, swaps and drops).
May import every layer up to :mod:`fedgraphrec.training`; nothing below imports it.
"""
