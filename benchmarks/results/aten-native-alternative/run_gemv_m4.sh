cd "$(dirname "$0")/../../.."
echo "# $(date -u) commit $(git rev-parse --short HEAD) + working tree; FXCPP_CACHE=0; one process per line, modes alternating, 2 rounds"
python -c "import fxcpp; h = fxcpp._C.host_info(); print(h['summary'], 'native_bf16', h['native_bf16'])" 2>/dev/null
for shape in "4096 4096 4" "2048 4096 4" "4096 11008 4" "4096 4096 8" "1024 4096 8"; do
for round in 1 2; do
for mode in eager gemv onednn default; do
  FXCPP_CACHE=0 python benchmarks/results/aten-native-alternative/linear_path.py $shape bf16 $mode 2>&1 | grep -v -i warn | tail -1
done; done; done
