# From the repo root: bash benchmarks/results/streaming-stores/llc_cap/ab.sh > ab.txt; python benchmarks/results/streaming-stores/llc_cap/table.py ab.txt
# alternate processes: streaming always (FXCPP_LLC_BYTES=1) vs never (2^50), 3 rounds
DTYPE=${DTYPE:-fp32}; export DTYPE
K=${K:-pointwise4,softmax,add_ln,softmax_then_mm}; S=${S:-8,16,32,48,64,96,128,192}
for r in 1 2 3; do
  for mode in always never; do
    [ $mode = always ] && L=1 || L=1125899906842624
    FXCPP_LLC_BYTES=$L python benchmarks/results/streaming-stores/llc_cap/sizes.py $mode $K $S 2>/dev/null | grep mode
  done
done
