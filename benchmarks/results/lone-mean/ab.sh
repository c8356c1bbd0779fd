#!/bin/bash
# Alternates the build before a change ($BASE: pip install --no-build-isolation --no-deps
# --target $BASE . in a worktree of it) and the installed build, $1 rounds; one process per
# timing (../onednn-call-args/latency.py: median of 21 loops of calls, batch 1, no_grad).
#   ./ab.sh ROUNDS [MODEL:DTYPE ...]   (here: the build of 20dae51 as $BASE, the default cases)
BASE=${BASE:-/tmp/base-site}; here=$(cd $(dirname $0) && pwd); lat=$here/../onednn-call-args/latency.py
rounds=$1; shift; cases=${@:-resnet20:float32 resnet20:bfloat16 mobilenetv2:bfloat16 resnet50:bfloat16}
for i in $(seq 1 $rounds); do
  for c in $cases; do
    echo "base $(cd /tmp && PYTHONPATH=$BASE python $lat ${c%:*} ${c#*:} 2>/dev/null | tail -1)"
    echo "new  $(cd /tmp && python $lat ${c%:*} ${c#*:} 2>/dev/null | tail -1)"
  done
done
