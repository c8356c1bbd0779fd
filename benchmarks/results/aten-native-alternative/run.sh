cd "$(dirname "$0")/../../.."
echo "# $(date -u) commit $(git rev-parse --short HEAD) + working tree; FXCPP_CACHE=0 (every choice measured in this process)"
for mbd in "bert_base 1 bf16" "bert_base 8 bf16" "gpt2 1 bf16" "resnet50 1 bf16" "mobilenetv2 1 bf16" \
           "bert_base 1 fp16" "bert_base 8 fp16" "gpt2 1 fp16" "resnet50 1 fp16" "mobilenetv2 1 fp16"; do
  echo "## FXCPP_CACHE=0 python benchmarks/results/aten-native-alternative/ab.py $mbd 10"
  FXCPP_CACHE=0 python benchmarks/results/aten-native-alternative/ab.py $mbd 10 2>&1 | grep -v -i warn | tail -2
done
