"""The buffer pool (runtime/buffer_pool.cpp) keeps freed outputs for the next call, up to a
budget. A process that moves on to other shapes (another model, a new batch size) used to keep
the old sizes forever once the budget was full, so every output of the new shape was a fresh
mapping, faulted in at every call: a bf16 x - x.mean(0) on [65536, 768] took 61 ms against 19
with room in the pool (benchmarks/results/outer-reductions/README.md). Now a cached buffer
unused for a second makes room for one that comes back; buffers reused sooner are never evicted,
so a working set larger than the budget keeps its hits instead of thrashing. Each check runs in
a process of its own: the budget is read once per process."""
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = textwrap.dedent("""
    import sys, time, torch, fxcpp
    from fxcpp import _C
    torch.set_num_threads(1)
    fa = torch.compile(lambda x: x * 2.0 + 1.0, backend="fxcpp")  # one function per shape: no recompile
    fb = torch.compile(lambda x: x * 2.0 + 1.0, backend="fxcpp")
    a = torch.randn(4096, 2048)  # output 32 MiB
    b = torch.randn(4096, 3072)  # output 48 MiB: the 64 MiB budget holds one of the two

    def hits_of(f, x, calls):
        h = _C.cpu_fused_stats()["pool_hits"]
        for _ in range(calls):
            f(x)
        return _C.cpu_fused_stats()["pool_hits"] - h

    with torch.no_grad():
        fb(b)  # compiled; b's buffer cached
        if sys.argv[1] == "stale":
            time.sleep(1.2)
            fa(a)  # compiled; a's buffer comes back and takes the place of b's, unused for a second
            a_hits = hits_of(fa, a, 3)
            time.sleep(1.2)
            fb(b)  # and the other way round
            print(a_hits, hits_of(fb, b, 4))
        else:  # both in use: whichever holds the place keeps it, the other is not kept
            fa(a)
            time.sleep(1.2)
            fa(a)  # a's buffer takes the place of b's, unused for a second
            fb(b)  # b's comes back a moment later: not kept
            rounds = [(hits_of(fa, a, 1), hits_of(fb, b, 1)) for _ in range(4)]
            print(sum(r[0] for r in rounds), sum(r[1] for r in rounds))
""")


def _run(mode):
    env = dict(os.environ, FXCPP_BUFFER_POOL_MB="64")
    out = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True, text=True, cwd=HERE,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return [int(v) for v in out.stdout.split()[-2:]]


def test_a_buffer_unused_for_a_second_makes_room_for_a_new_shape():
    a_hits, b_hits = _run("stale")
    assert (a_hits, b_hits) == (3, 4)  # before: (0, 4): b's buffer kept forever, every output of a fresh


def test_buffers_in_use_are_not_evicted():
    a_hits, b_hits = _run("alternate")
    assert a_hits == 4 and b_hits == 0
