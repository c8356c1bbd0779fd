"""Micro-benchmarks for the physical limits: peak FLOP/s, GEMM, memory bandwidth, host overhead.

    python -m benchmarks.micro.run [--quick] [--no-inductor] [--out DIR]
"""
