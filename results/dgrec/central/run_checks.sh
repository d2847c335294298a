#!/usr/bin/env bash
# Budget checks, seed 0: Ciao LightGCN-side at the full 100 epochs; FedGNN (ε = 1) at 100 rounds.
set -euo pipefail
export PYTHONPATH=src OMP_NUM_THREADS=1 FEDGRAPHREC_DATA=${FEDGRAPHREC_DATA:-/work/shared/datasets}
PY=${PY:-python}
R="$PY benchmarks/dgrec_central.py"
$R lightgcn-side --dataset ciao-10core --epochs 100 --set lr=0.005 --seed 0 --out results/dgrec/central/checks
$R fedgnn --dataset flixster --epochs 100 --set lr=0.005 --seed 0 --out results/dgrec/central/checks
