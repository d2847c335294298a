#!/usr/bin/env bash
# The two centralised models at Adam lr 0.005 (lr 0.001 left HyperGNN under-trained at 100 epochs).
set -euo pipefail
export PYTHONPATH=src OMP_NUM_THREADS=1 FEDGRAPHREC_DATA=${FEDGRAPHREC_DATA:-/work/shared/datasets}
PY=${PY:-python}
R="$PY benchmarks/dgrec_central.py"
O=results/dgrec/central/lr0.005
$R lightgcn-side --dataset flixster --epochs 100 --set lr=0.005 --seed 0 --out $O
$R lightgcn-side --dataset ciao-10core --epochs 50 --set lr=0.005 --seed 0 --out $O
for s in 1 2; do
  $R hypergnn --dataset flixster --epochs 100 --set lr=0.005 --seed $s --out $O
  $R lightgcn-side --dataset flixster --epochs 100 --set lr=0.005 --seed $s --out $O
  $R hypergnn --dataset ciao-10core --epochs 100 --set lr=0.005 --seed $s --out $O
  $R lightgcn-side --dataset ciao-10core --epochs 50 --set lr=0.005 --seed $s --out $O
done
