#!/bin/bash
# Alternates the build before the change (pip install --no-build-isolation --no-deps --target
# $BASE . in a worktree of a1de6df) and the installed build, $1 rounds; one process per timing
# (../onednn-call-args/latency.py: median of 21 loops of calls, batch 1, no_grad, 2 threads).
BASE=${BASE:-/tmp/base-site}; here=$(cd $(dirname $0) && pwd); lat=$here/../onednn-call-args/latency.py
for i in $(seq 1 $1); do
  for m in "resnet20 float32" "resnet20 bfloat16" "mlp float32" "bert_base float32"; do
    echo "base $(cd /tmp && PYTHONPATH=$BASE python $lat $m 2>/dev/null | tail -1)"
    echo "new  $(cd /tmp && python $lat $m 2>/dev/null | tail -1)"
  done
done
