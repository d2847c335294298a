"""fedgraphrec.experiments."""
