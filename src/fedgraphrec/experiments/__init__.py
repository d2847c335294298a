"""Configuration, the training loop, run folders and plots."""

from fedgraphrec.experiments.config import ConfigError, TrainConfig, load_config
from fedgraphrec.experiments.runstore import RunDir, default_run_dir
from fedgraphrec.experiments.sampler import BPRSampler, Triples
from fedgraphrec.experiments.train import (
    RunResult,
    Trainer,
    build_model,
    evaluate_model,
    prepare_interactions,
)

__all__ = [
    "BPRSampler",
    "ConfigError",
    "RunDir",
    "RunResult",
    "TrainConfig",
    "Trainer",
    "Triples",
    "build_model",
    "default_run_dir",
    "evaluate_model",
    "load_config",
    "prepare_interactions",
]
