#!/usr/bin/env bash
# The benchmark suite at large batch on one GPU, in well under 8 minutes; results under
# experiments/benchmarks/results/gpu/ (or $RESULTS). Needs a Python with jax[cuda] plus this project
# (`pip install -e '.[dev]'` and `pip install -U "jax[cuda12]"`); $PYTHON picks it (default .venv/bin/python).
#
#   bash experiments/benchmarks/gpu.sh            # on a GPU machine
#   bash experiments/benchmarks/gpu.sh --small    # the same script on CPU with small batches (a smoke test)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
RESULTS=${RESULTS:-experiments/benchmarks/results/gpu}
if [[ "${1:-}" == "--small" ]]; then
  BATCHES=1,64; BIG=64; STEPS=10; NODES=4,8; QUICK=--quick; RESULTS=${RESULTS}_small
else
  BATCHES=1024,65536,1048576; BIG=65536; STEPS=100; NODES=4,16,64,256; QUICK=
fi
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1
"$PY" -c "import jax; print('devices:', jax.devices())" | tee "$RESULTS/devices.txt"
for robot in panda solo12 talos; do   # Pinocchio anchors run on the host CPU; MJX (Panda) on the GPU
  "$PY" -m experiments.benchmarks.bench_core --robot "$robot" --batches "$BATCHES" --dtypes float32,float64 \
      --settings emitters_off --variant-batches "" --repeats 5 --target-s 0.2 --out "$RESULTS/core_$robot.json"
done
"$PY" -m experiments.benchmarks.bench_batch_last --robots panda,solo12,talos,ball_humanoid --batches "$BATCHES" \
    --dtypes float32,float64 --rounds 5 --out "$RESULTS/batch_last.json"     # leading-batch vs vmap paths
"$PY" -m experiments.benchmarks.bench_topology $QUICK --batch "$BIG" --crossover-batch "$BIG" --out "$RESULTS/topology.json"
"$PY" -m experiments.benchmarks.bench_gradient $QUICK --batch "$BIG" --steps "$STEPS" --out "$RESULTS/gradient.json"
"$PY" -m experiments.benchmarks.bench_scaling $QUICK --batch "$BIG" --out "$RESULTS/scaling.json"
"$PY" -m experiments.benchmarks.bench_tether --elements "$NODES" --batch "$BIG" --out "$RESULTS/tether.json"
"$PY" -m experiments.benchmarks.bench_stewart --batches "1024,$BIG" --out "$RESULTS/stewart.json"
"$PY" -m experiments.benchmarks --results "$RESULTS" --report   # the target table from the JSON files
