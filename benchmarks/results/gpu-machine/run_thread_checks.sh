#!/bin/bash
# On the lent GPU machine (torch 2.11), from the repo root, with .whl/ carried: build, then the
# FX-flag race under three backends and the suite's thread tests and saved-plan tests in parallel.
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps .whl/*.whl 2>&1 | tail -2
python3 -m pip install -q --no-build-isolation --no-deps . > $OUT/build.txt 2>&1 || { tail -50 $OUT/build.txt; exit 1; }
echo "built after $(( $(date +%s) - T0 )) s"; python3 -c "import torch; print(torch.__version__)"; nproc
python3 - <<'PY'
import inspect, torch.fx._symbolic_trace as st, torch
print(inspect.getsource(st.is_fx_symbolic_tracing))
PY
for b in eager aot_eager fxcpp; do timeout 60 python3 benchmarks/results/gpu-machine/fx_flag_race.py $b 15 2>&1 | grep "torch 2"; done
cd tests && timeout 200 python3 -m pytest -q -p no:cacheprovider -p xdist -n 8 -rfE python/test_saved_plan.py \
  "python/test_hostile_inputs.py::test_one_model_compiled_from_eight_threads_at_once" \
  "python/test_cpu_fused_outer_reductions.py::test_many_threads_share_one_compiled_function" 2>&1 | tail -8
echo "done after $(( $(date +%s) - T0 )) s"
