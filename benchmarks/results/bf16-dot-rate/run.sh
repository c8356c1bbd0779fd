cd "$(dirname "$0")/../../.."
echo "# $(date -u) commit $(git rev-parse --short HEAD) + working tree (bf16 dot-rate rule)"
for round in 1 2; do
for mb in "bert_base 1" "gpt2 1" "resnet50 1" "mobilenetv2 1" "bert_base 8"; do
for mode in native ""; do
  echo "## round $round: AB_MODE=$mode python benchmarks/results/bf16-dot-rate/ab.py $mb 10"
  AB_MODE=$mode python benchmarks/results/bf16-dot-rate/ab.py $mb 10 2>&1 | grep -v -i warn | tail -4
done; done; done
