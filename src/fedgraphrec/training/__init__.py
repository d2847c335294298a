"""Training: the one loop (:class:`Trainer`), its configuration, learners, sampler, run folders, plots.

May import data, models, evaluation, crypto, privacy, runtime, protocols and attacks; audits, reproduce,
engines and the CLI build on it.
"""

from fedgraphrec.training.central import CentralLearner
from fedgraphrec.training.config import ConfigError, TrainConfig
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.learner_base import BatchStats, Learner, build_model
from fedgraphrec.training.learners import make_learner
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.rundir import RunDir, default_run_dir
from fedgraphrec.training.sampler import BPRSampler, Triples
from fedgraphrec.training.trainer import RunResult, Trainer, evaluate_embeddings_on

__all__ = [
    "BPRSampler",
    "BatchStats",
    "CentralLearner",
    "ConfigError",
    "Learner",
    "ProtocolLearner",
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
