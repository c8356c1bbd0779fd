#!/bin/bash
# On the lent GPU machine, from the repo root, with .whl/ carried (onednn-cpu-gomp and -devel
# 2023.2.0, expecttest 0.3.0, transformers 5.23.0): install, build fxcpp against the machine's
# torch, run make test's suite in parallel. Output under $OUT.
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps .whl/*.whl 2>&1 | tail -2
python3 -m pip install -q --no-build-isolation --no-deps . > $OUT/build.txt 2>&1 || { tail -50 $OUT/build.txt; exit 1; }
echo "built after $(( $(date +%s) - T0 )) s"
nvidia-smi -L; python3 -c "import torch; print(torch.__version__, torch.cuda.is_available())"; lscpu | grep -i "model name"; nproc
git log -1 --format="commit %H" 2>/dev/null
cd tests && OMP_NUM_THREADS=2 timeout ${SUITE_S:-420} python3 -m pytest -q -p no:cacheprovider -p xdist -n 14 -rfEs > $OUT/suite.txt 2>&1
echo "rc=$?" >> $OUT/suite.txt; tail -30 $OUT/suite.txt; echo "suite done after $(( $(date +%s) - T0 )) s"
