"""One DGREC run through ``fedgraphrec.training.dgrec.run`` with a test evaluation after every epoch.

``python -m scripts.dgrec_sweep DATASET LR EPOCHS CENTRES ['{"seed": 0, "variant": "dgrec", ...}']``
prints one JSON line (settings given, final metrics, the per-epoch curve, seconds). Used for the
learning-rate sweep of ``results/dgrec/README.md`` (``results/dgrec/diagnose/sweeps_eq2.jsonl``).
"""

from __future__ import annotations

import json
import sys
import time

import torch

from fedgraphrec.training.dgrec import run


def main() -> None:
    """Parse the positional arguments, run, print the JSON line."""
    torch.set_num_threads(1)
    ds, lr, epochs, centres = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    extra = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    seed, variant = extra.pop("seed", 0), extra.pop("variant", "dgrec")
    t0 = time.time()
    r = run(ds, variant, seed, epochs, 1, lr=lr, centres_per_epoch=centres, **extra)
    line = {"ds": ds, "lr": lr, "ep": epochs, "cen": centres, "extra": extra, "seed": seed}
    line["variant"] = variant
    print(json.dumps({**line, "m": r["metrics"], "curve": r["curve"], "s": time.time() - t0}), flush=True)


if __name__ == "__main__":
    main()
