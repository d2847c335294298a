"""Configuration, the training loop, run folders and plots."""

from fedgraphrec.experiments.config import ConfigError, TrainConfig, load_config
from fedgraphrec.experiments.learners import (
    BatchStats,
    CentralLearner,
    Learner,
    LPGCNLearner,
    build_model,
    make_learner,
)
from fedgraphrec.experiments.runstore import RunDir, default_run_dir
from fedgraphrec.experiments.sampler import BPRSampler, Triples
from fedgraphrec.experiments.train import RunResult, Trainer, evaluate_embeddings_on, prepare_interactions

__all__ = [
    "BPRSampler",
    "BatchStats",
    "CentralLearner",
    "ConfigError",
    "LPGCNLearner",
    "Learner",
    "RunDir",
    "RunResult",
    "TrainConfig",
    "Trainer",
    "Triples",
    "build_model",
    "default_run_dir",
    "evaluate_embeddings_on",
    "load_config",
    "make_learner",
    "prepare_interactions",
]
