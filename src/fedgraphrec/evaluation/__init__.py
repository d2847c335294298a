"""fedgraphrec.evaluation."""
