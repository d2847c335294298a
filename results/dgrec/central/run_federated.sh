#!/usr/bin/env bash
# FedGNN / FedRec at ε = 1 (δ = 0.1, Laplace λ = 0.2) on the DGREC split, then ε = ∞ references (seed 0)
# and a HyperGNN learning-rate check (seed 0). One process at a time, one thread.
set -euo pipefail
export PYTHONPATH=src OMP_NUM_THREADS=1 FEDGRAPHREC_DATA=${FEDGRAPHREC_DATA:-/work/shared/datasets}
PY=${PY:-python}
R="$PY benchmarks/dgrec_central.py"
O=results/dgrec/central
ROUNDS=${ROUNDS:-40}
for s in 0 1 2; do
  for d in flixster ciao-10core; do
    $R fedgnn --dataset $d --epochs $ROUNDS --set lr=0.005 --seed $s --out $O
    $R fedrec --dataset $d --epochs $ROUNDS --set lr=0.005 --seed $s --out $O
  done
done
for d in flixster ciao-10core; do
  for m in fedgnn fedrec; do
    $R $m --dataset $d --epochs $ROUNDS --set lr=0.005 --set epsilon=inf --seed 0 --out $O/no_noise
  done
  $R hypergnn --dataset $d --epochs 100 --set lr=0.005 --seed 0 --out $O/lr0.005
done
