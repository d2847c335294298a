#!/usr/bin/env bash
# DGREC Table 2 side-information baselines on the DGREC split, one process at a time, one thread.
# Run from the repository root: bash results/dgrec/central/run_central.sh
set -euo pipefail
export PYTHONPATH=src OMP_NUM_THREADS=1 FEDGRAPHREC_DATA=${FEDGRAPHREC_DATA:-/work/shared/datasets}
PY=${PY:-python}
R="$PY benchmarks/dgrec_central.py"
O=results/dgrec/central
for s in 0 1 2; do
  $R lightgcn-side --dataset flixster --epochs 100 --seed $s --out $O
  $R hypergnn --dataset flixster --epochs 100 --seed $s --out $O
  $R hypergnn --dataset ciao-10core --epochs 100 --seed $s --out $O
  $R lightgcn-side --dataset ciao-10core --epochs 50 --seed $s --out $O   # 2.4 s/epoch: 50 epochs
done
