"""Paper reproductions: tables, figures and their runners; the paper numbers they read are data.

``papers`` (the typed reader of ``papers/<paper>.toml``: each paper's printed cells, our budgets and
the learning rates tuned for them), ``tables`` (ranking tables and the registry of ``fedgraphrec
reproduce``), ``runs`` (P4GCN and DGREC tables run by their own runners), ``figures`` /
``paper_figures`` / ``claims`` (figures and the claims read off them), ``formula_tables`` with
``lpgcn_communication`` / ``lpgcn_fig13`` (results computed without training), ``compare`` and
``frontier`` / ``frontier_social`` (side-by-side utility, privacy and cost), and the P4GCN / DGREC
runners. May import every layer up to :mod:`fedgraphrec.training` and :mod:`fedgraphrec.audits`;
only the CLI imports it.
"""
