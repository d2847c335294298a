#!/usr/bin/env bash
# The exact commands behind results/dgrec/ (run from the worktree root with the venv's python).
# Three lanes run in parallel; every run: 2 epochs x 300 group centres, lr 0.5, Flixster (Monti).
set -u
export FEDGRAPHREC_DATA=${FEDGRAPHREC_DATA:-/work/shared/datasets} PYTHONPATH=src OMP_NUM_THREADS=1
PY=${PY:-/work/main/.venv/bin/python}
OUT=results/dgrec/runs
run() { v=$1; shift; $PY benchmarks/dgrec_runs.py run --variant "$v" "$@" --dataset flixster --epochs 2 --centres 300 --lr 0.5 --out $OUT; }
lane1() { run dgrec --seed 0; run dmf --seed 0; run dlgnn --seed 0; run non-item-graph --seed 0; run non-pearson --seed 0; run dgrec --seed 0 --public-ratio 0.2; }
lane2() { run dgrec --seed 1; run dmf --seed 1; run dlgnn --seed 1; run non-neighbor --seed 0; run non-sharing --seed 0; run dgrec --seed 0 --public-ratio 0.6; }
lane3() { run dgrec --seed 2; run dmf --seed 2; run dlgnn --seed 2; run local-only --seed 0; run non-attention --seed 0; run dgrec --seed 0 --public-ratio 0.4; }
lane1 > results/dgrec/lane1.log 2>&1 &
lane2 > results/dgrec/lane2.log 2>&1 &
lane3 > results/dgrec/lane3.log 2>&1 &
wait
