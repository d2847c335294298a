"""fedgraphrec.data."""
