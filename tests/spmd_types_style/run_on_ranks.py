"""Run programs.py under spmd_types' runtime checker (strict mode) on 2
simulated ranks (torch's fake process group and LocalTensorMode), and compare
each result with the same computation on full tensors in one process.
Prints one line per program: `<name> ok <local type>` or `<name> FAIL <why>`.
Run in its own process (it initializes a process group)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed._local_tensor import LocalTensorMode
from torch.distributed.device_mesh import init_device_mesh
from torch.testing._internal.distributed.fake_pg import FakeStore

import spmd_types as spmd
from spmd_types.checker import typecheck

sys.path.insert(0, str(Path(__file__).resolve().parent))
import boundaries  # noqa: E402
import programs  # noqa: E402

TP = 2
torch.manual_seed(0)
X, W_UP, W_DOWN = torch.randn(4, 6), torch.randn(8, 6), torch.randn(6, 8)
LOGITS = torch.randn(3, 10)
H, W_OUT = torch.randn(4, 8), torch.randn(6, 8)
LABELS = torch.tensor([2, -1, 7])


def _rows(t: torch.Tensor, r: int) -> torch.Tensor:
    return t.chunk(TP, 0)[r].clone()


def _cols(t: torch.Tensor, r: int) -> torch.Tensor:
    return t.chunk(TP, 1)[r].clone()


def _mlp_reference(act):  # type: ignore[no-untyped-def]
    return act(X @ W_UP.T) @ W_DOWN.T


def _nll_reference() -> torch.Tensor:
    keep = LABELS >= 0
    picked = torch.log_softmax(LOGITS, -1).gather(-1, LABELS.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return -(picked * keep).sum() / keep.sum()


CASES = {
    "tp_mlp": (
        lambda m: (m.rank_map(lambda r: X.clone()), m.rank_map(lambda r: _rows(W_UP, r)),
                   m.rank_map(lambda r: _cols(W_DOWN, r))),
        lambda whole, r: whole,
        _mlp_reference(F.gelu),
    ),
    "sp_mlp": (
        lambda m: (m.rank_map(lambda r: _rows(X, r)), m.rank_map(lambda r: _rows(W_UP, r)),
                   m.rank_map(lambda r: _cols(W_DOWN, r))),
        lambda whole, r: _rows(whole, r),  # each rank's sequence shard
        _mlp_reference(F.relu),
    ),
    "vocab_parallel_logsumexp": (
        lambda m: (m.rank_map(lambda r: _cols(LOGITS, r)),),
        lambda whole, r: whole,
        torch.logsumexp(LOGITS, dim=-1, keepdim=True),
    ),
    # boundaries.py: a typecheck_forward Function, local_map, no_typecheck, integer labels
    "row_parallel": (
        lambda m: (m.rank_map(lambda r: _cols(H, r)), m.rank_map(lambda r: _cols(W_OUT, r))),
        lambda whole, r: whole,
        H @ W_OUT.T,
    ),
    "linear_all_reduce": (
        lambda m: (m.rank_map(lambda r: _cols(H, r)), m.rank_map(lambda r: _cols(W_OUT, r))),
        lambda whole, r: whole,
        H @ W_OUT.T,
    ),
    "gathered_rows": (
        lambda m: (m.rank_map(lambda r: _rows(X, r)),),
        lambda whole, r: whole,
        X * 2,
    ),
    "masked_nll": (
        lambda m: (m.rank_map(lambda r: LOGITS.clone()), m.rank_map(lambda r: LABELS.clone())),
        lambda whole, r: whole,
        _nll_reference(),
    ),
}


# Run in spmd_types' global mode (typecheck(local=False), as torchtitan runs its
# checker): its rules.einsum types a contraction over a sharded label as the
# pending sum only there (in local mode the result is V).
GLOBAL_CASES = frozenset({"linear_all_reduce"})


def main() -> int:
    dist.init_process_group(backend="fake", rank=0, world_size=TP, store=FakeStore())
    mesh = init_device_mesh("cpu", (TP,), mesh_dim_names=("tp",))
    failed = 0
    for name, (inputs, expected_at, whole) in CASES.items():
        try:
            with LocalTensorMode(TP) as mode, spmd.set_current_mesh(mesh):
                args = inputs(mode)
                with typecheck(strict_mode="strict", local=name not in GLOBAL_CASES):
                    module = programs if hasattr(programs, name) else boundaries
                    out = getattr(module, name)(*args)
                    local_type = spmd.get_local_type(out)
                for r in range(TP):
                    want = expected_at(whole, r)
                    got = out._local_tensors[r]
                    if not torch.allclose(got, want, atol=1e-5):
                        raise AssertionError(f"rank {r}: values differ from one process")
            print(name, "ok", sorted(str(t) for t in local_type.values()))
        except Exception as e:  # reported, the caller asserts
            failed += 1
            print(name, "FAIL", type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
