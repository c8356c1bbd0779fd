#!/bin/bash
# The serving load test (python -m benchmarks.serve: 8 client threads, 2 workers x 1 intra-op
# thread, fxcpp only), the build before the change ($BASE, a1de6df) and the installed build
# alternating, $1 rounds; one line per run from each run's serve.md.
#   ./serve_ab.sh ROUNDS [MODEL:DTYPE ...]   (default resnet20:fp32 resnet20:bf16 mlp:fp32)
BASE=${BASE:-/tmp/base-site}; repo=$(cd $(dirname $0)/../../.. && pwd)
rounds=$1; shift; cases=${@:-resnet20:fp32 resnet20:bf16 mlp:fp32}
for i in $(seq 1 $rounds); do
  for c in $cases; do
    m=${c%:*}; dt=${c#*:}
    for v in base new; do
      pp=; [ $v = base ] && pp=$BASE
      (cd $repo && PYTHONPATH=$pp python -m benchmarks.serve --model $m --dtype $dt --configs fxcpp --requests 2000 \
          --rounds 1 --out /tmp/serve_ab/$v-$m-$dt-$i > /dev/null 2>&1)
      echo "$v $m $dt $(grep '| 0 | fxcpp' /tmp/serve_ab/$v-$m-$dt-$i/serve.md)"
    done
  done
done
