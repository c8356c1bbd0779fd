#!/usr/bin/env bash
# Before/after the shared first-call choices, fresh processes, alternating build by build.
# Usage: ab.sh ROUNDS BASE_SITE [MODEL:BATCH:DTYPE ...]
#   BASE_SITE: the build before, installed with
#   pip install --no-build-isolation --no-deps --target BASE_SITE .   (into an empty BASE_SITE)
set -euo pipefail
rounds=$1; base=$2; shift 2
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(bert_base:1:float32 bert_base:8:float32 vit_b16:8:float32 gpt2:8:float32
                               t5_small:8:float32 resnet50:8:float32 bert_base:8:bfloat16 vit_b16:8:bfloat16)
here=$(cd "$(dirname "$0")" && pwd)
cd /tmp
python -c "import fxcpp; print(fxcpp._C.host_info()['summary'])"
for r in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    IFS=: read -r m b d <<< "$c"
    echo "round $r before $(PYTHONPATH=$base python "$here/first_call.py" "$m" "$b" "$d" 2>/dev/null | tail -1)"
    echo "round $r after $(python "$here/first_call.py" "$m" "$b" "$d" 2>/dev/null | tail -1)"
  done
done
