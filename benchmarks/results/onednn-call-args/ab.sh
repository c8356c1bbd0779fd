#!/bin/bash
# Alternates the build before the change (pip install --no-build-isolation --no-deps --target
# $BASE . in a worktree of it) and the installed build, $1 rounds; one process per timing.
BASE=${BASE:-/tmp/base-site}; here=$(cd $(dirname $0) && pwd)
for i in $(seq 1 $1); do
  for m in "resnet20 float32" "resnet20 bfloat16" "mlp float32" "mlp bfloat16" "bert_base float32" "bert_base bfloat16"; do
    echo "base $(cd /tmp && PYTHONPATH=$BASE python $here/latency.py $m 2>/dev/null | tail -1)"
    echo "new  $(cd /tmp && python $here/latency.py $m 2>/dev/null | tail -1)"
  done
done
