#!/bin/bash
# On the lent GPU machine, from the repo root: install, the whole suite, then the full bf16/fp16 OpInfo sweep in 16 shards.
T0=$(date +%s); BUDGET=${BUDGET:-585}
python3 -m pip install -q --no-index --no-deps .whl/*.whl 2>&1 | tail -2
if [ -f .whl/fxcpp-installed.tgz ]; then  # built on an earlier call of this session: unpack, skip the build
  SP=$(python3 -c "import torch,os; print(os.path.dirname(os.path.dirname(torch.__file__)))"); tar xzf .whl/fxcpp-installed.tgz -C $SP
  cp backend/*.py $SP/fxcpp/
else
python3 -m pip install -q --no-build-isolation --no-deps . > $OUT/build.txt 2>&1 || { tail -50 $OUT/build.txt; exit 1; }
SP=$(python3 -c "import fxcpp,os; print(os.path.dirname(os.path.dirname(fxcpp.__file__)))"); tar czf $OUT/fxcpp-installed.tgz -C $SP fxcpp $(cd $SP && ls -d fxcpp-*.dist-info); ls -la $OUT
fi
echo "built after $(( $(date +%s) - T0 )) s"
nvidia-smi -L; python3 -c "import torch; print(torch.__version__, torch.cuda.is_available())"; lscpu | grep -i "model name"; nproc
cd tests
if [ -z "$SKIP_SUITE" ]; then
  OMP_NUM_THREADS=2 timeout ${SUITE_S:-400} python3 -m pytest -q -p no:cacheprovider -p xdist -n 14 -rfEs > $OUT/suite.txt 2>&1; echo "rc=$?" >> $OUT/suite.txt
  tail -25 $OUT/suite.txt; echo "suite done after $(( $(date +%s) - T0 )) s"
fi
[ -n "$PROBE" ] && (cd .. && OMP_NUM_THREADS=1 timeout 400 python3 .whl/soak_probe.py > $OUT/soak_probe.txt 2>&1) &
rm -rf /tmp/op; mkdir -p /tmp/op; REM=$(( BUDGET - ($(date +%s) - T0) ))
RES=""; [ -f ../.whl/opinfo-resume.json ] && RES=$PWD/../.whl/opinfo-resume.json
NSH=${NSH:-16}; for i in $(seq 0 $((NSH-1))); do FXCPP_OPINFO_RESUME=$RES FXCPP_OPINFO_FULL=1 FXCPP_OPINFO_DTYPES=bf16,fp16 FXCPP_OPINFO_SHARD=$i/$NSH FXCPP_OPINFO_JSON=/tmp/op/s$i.json OMP_NUM_THREADS=1 timeout $REM python3 -m pytest -q -p no:cacheprovider python/test_opinfo_sweep.py > /tmp/op/log$i.txt 2>&1 & done; wait
python3 python/opinfo_merge.py --full $OUT/opinfo-full.json /tmp/op/s*.json $RES > $OUT/opinfo-summary.txt 2>&1; head -c 8000 $OUT/opinfo-summary.txt
tail -3 /tmp/op/log0.txt
