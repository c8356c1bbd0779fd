cd "$(dirname "$0")/../../.."
echo "# $(date -u) commit $(git rev-parse --short HEAD) + working tree; FXCPP_CACHE=0; one process per line, modes alternating, 3 rounds"
python -c "import fxcpp; print(fxcpp._C.host_info()['summary'])" 2>/dev/null
for shape in "1024 4096 1 bf16" "4096 4096 4 bf16" "768 3072 128 bf16" "1024 4096 1 fp16" "768 3072 128 fp16"; do
for round in 1 2 3; do
for mode in eager aten aten_widened default; do
  FXCPP_CACHE=0 python benchmarks/results/aten-native-alternative/linear_path.py $shape $mode 2>&1 | grep -v -i warn | tail -1
done; done; done
