"""An annotated corpus of tensor-parallel training code (issue 13).

Fresh code written in the styles of Megatron-core, nanotron, picotron and
torchtitan (never copied from them), annotated at module boundaries as the
README describes.  Where the checker cannot yet express what such code
writes (a ProcessGroup as an axis, a flag-dependent layout, a max all-reduce)
the code is written the way a user would write it, and the benchmark
(bench/bench_realcode.py) and tests/corpus/test_realcode.py record the gap.

Nothing runs at import time: every module imports without
torch.distributed being initialised.
"""
