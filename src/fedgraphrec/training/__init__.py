"""Training: the one loop (:class:`Trainer`), its configuration, learners, sampler, run folders, plots.

May import data, models, evaluation, crypto, privacy, runtime, protocols and attacks; audits, reproduce,
engines and the CLI build on it.
"""
