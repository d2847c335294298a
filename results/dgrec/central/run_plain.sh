#!/usr/bin/env bash
# Plain LightGCN (no side edges) through the same runner and settings as lightgcn-side, lr 0.005.
set -euo pipefail
export PYTHONPATH=src OMP_NUM_THREADS=1 FEDGRAPHREC_DATA=${FEDGRAPHREC_DATA:-/work/shared/datasets}
PY=${PY:-python}
R="$PY benchmarks/dgrec_central.py"
for s in 0 1 2; do
  $R lightgcn --dataset flixster --epochs 100 --set lr=0.005 --seed $s --out results/dgrec/central/lr0.005
  $R lightgcn --dataset ciao-10core --epochs 50 --set lr=0.005 --seed $s --out results/dgrec/central/lr0.005
done
