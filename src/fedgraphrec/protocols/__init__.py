"""fedgraphrec.protocols: federated training protocols, one sub-package per paper."""
