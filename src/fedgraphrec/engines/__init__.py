"""Engines that run the protocols across processes; today Flower (:mod:`fedgraphrec.engines.flower`)."""
