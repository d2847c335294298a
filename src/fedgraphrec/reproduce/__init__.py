"""Paper reproductions: tables, figures, the paper numbers (stored once) and their runners.

``tables`` (ranking tables and the registry of ``fedgraphrec reproduce``), ``runs`` (P4GCN and DGREC
tables run by their own runners), ``figures`` / ``paper_figures`` / ``claims`` (figures and the claims
read off them), ``compare`` and ``frontier`` / ``frontier_social`` (side-by-side utility, privacy and
cost), and the P4GCN / DGREC runners. May import every layer up to :mod:`fedgraphrec.training` and
:mod:`fedgraphrec.audits`; only the CLI imports it.
"""
