#!/bin/bash
# On the lent GPU machine (torch 2.11), from the repo root, with .whl/ carried (onednn-cpu-gomp and
# -devel 2023.2.0, expecttest 0.3.0, transformers 5.23.0): build once, then the FX-flag race under
# three backends (fx_flag_race.py) and make test's whole suite in parallel. Output under $OUT.
# On 2026-11-26 (H200) the build took 82 s and the race 87 s at RACE_S=15, and the suite did not end
# inside SUITE_S=380: the defaults now leave it 420 s, inside the device tool's 600 s a command.
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps .whl/*.whl 2>&1 | tail -2
python3 -m pip install -q --no-build-isolation --no-deps . > $OUT/build.txt 2>&1 || { tail -50 $OUT/build.txt; exit 1; }
echo "built after $(( $(date +%s) - T0 )) s"
nvidia-smi -L; python3 -c "import torch; print(torch.__version__, torch.cuda.is_available())"; lscpu | grep -i "model name"; nproc
for b in eager aot_eager fxcpp; do timeout 60 python3 benchmarks/results/gpu-machine/fx_flag_race.py $b ${RACE_S:-8} 2>&1 | grep "torch 2"; done | tee $OUT/race.txt
echo "race done after $(( $(date +%s) - T0 )) s"
cd tests && OMP_NUM_THREADS=2 timeout ${SUITE_S:-420} python3 -m pytest -q -p no:cacheprovider -p xdist -n 14 -rfEs > $OUT/suite.txt 2>&1
echo "rc=$?" >> $OUT/suite.txt; tail -30 $OUT/suite.txt; echo "suite done after $(( $(date +%s) - T0 )) s"
