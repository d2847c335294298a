"""fedgraphrec.models."""
