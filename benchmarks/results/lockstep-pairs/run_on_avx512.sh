# On the lent GPU machine (an AVX-512 Xeon, torch 2.11), from the repo root with .whl/ carried: build, compare the
# AVX2 and AVX-512 builds' outputs bit for bit (bits.py), then the exp/GELU/tanh bit and accuracy tests and every ISA's fused tests.
T0=$(date +%s)
python3 -m pip install -q --no-index --no-deps .whl/*.whl 2>&1 | tail -1
python3 -m pip install -q --no-build-isolation --no-deps . > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "built after $(( $(date +%s) - T0 )) s"; git log --oneline -1 2>/dev/null
python3 -c "import fxcpp, torch; print(torch.__version__, torch.backends.cpu.get_cpu_capability(), fxcpp._C.host_info()['summary'])"
B=benchmarks/results/lockstep-pairs/bits.py
ATEN_CPU_CAPABILITY=avx2 OMP_NUM_THREADS=2 python3 $B /tmp/avx2.pt > $OUT/bits_avx2.txt 2>&1 & P=$!
ATEN_CPU_CAPABILITY=avx512 OMP_NUM_THREADS=2 python3 $B /tmp/avx512.pt > $OUT/bits_avx512.txt 2>&1
wait $P; python3 $B --compare /tmp/avx2.pt /tmp/avx512.pt 2>&1 | tail -12
echo "bits after $(( $(date +%s) - T0 )) s"
cd tests && timeout $((290 - $(date +%s) + T0)) python3 -m pytest -q -p no:cacheprovider -p xdist -n 6 -rs python/test_exp_u10.py python/test_gelu_erf.py python/test_tanh_exp.py python/test_cpu_fused_isa.py 2>&1 | tail -8
echo "done after $(( $(date +%s) - T0 )) s"
