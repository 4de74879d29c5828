"""Shard propagation in global SPMD (vocab/factors.py) and S(i) collectives on specs.

Expected types, messages and fixes are written by hand from the rules in
notes/typing-rules.md and the design seed; the reshape property test checks
accepted reshapes against an independent model of block sharding.
"""

from __future__ import annotations

import itertools
import math
from typing import List, Mapping, Optional, Sequence, Tuple

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from spmd_mypy import I, P, R, S, V
from spmd_mypy.vocab.factors import FACTOR_TABLE, RULES, FactorError, has_rule, propagate
from spmd_mypy.vocab.globaltype import GlobalType
from spmd_mypy.vocab.spec import SpecError
from spmd_mypy.vocab.opclasses import SCALAR
from spmd_mypy.vocab.spec_collectives import apply_collective


def g(text: str) -> GlobalType:
    return GlobalType.parse(text)


def run(op: str, operands: Sequence[object], params: Optional[dict] = None, out=(), mesh=None) -> GlobalType:
    ops = [g(o) if isinstance(o, str) else o for o in operands]
    return propagate(op, ops, params or {}, out, mesh=mesh)


# -- accepted: (op, operands, params, out_partial_axes, mesh, result) -------------------

ACCEPTED = [
    # pointwise / broadcast: right-aligned dims share a factor; size-1 dims have none
    ("add", ["f32[8@dp,16]", "f32[16]"], {}, (), None, "f32[8@dp,16]"),
    ("add", ["[8@dp,1]", "[8@dp,16]"], {}, (), None, "[8@dp,16]"),
    ("__add__", ["[?,?@tp]", "[1,?@tp]"], {}, (), None, "[?,?@tp]"),
    ("add", ["[?@dp,?]{P:tp}", "[?@dp,?]{P:tp}"], {}, (), None, "[?@dp,?]{P:tp}"),  # P + P
    ("mul", ["[?@dp,?]{P:tp}", "[?]"], {}, (), None, "[?@dp,?]{P:tp}"),  # P * R
    ("mul", ["[8@dp]{P:tp}", 2.0], {}, (), None, "[8@dp]{P:tp}"),  # P * scalar
    ("__rmul__", [SCALAR, "[8@dp]{P:tp}"], {}, (), None, "[8@dp]{P:tp}"),
    ("div", ["[8@dp]{P:tp}", "[8@dp]"], {}, (), None, "[8@dp]{P:tp}"),  # linear in the numerator
    ("mul", ["[8]{I:tp}", "[8]{nograd}"], {}, (), None, "[8]{I:tp}"),  # a no-grad R conforms to I
    ("relu", ["bf16[8@dp,16@tp]"], {}, (), None, "bf16[8@dp,16@tp]"),
    ("where", ["[8@dp]{nograd}", "[8@dp]", "[8@dp]"], {}, (), None, "[8@dp]"),
    ("eq", ["f32[8@dp]", "f32[8@dp]"], {}, (), None, "bool[8@dp]{nograd}"),
    ("float", ["bf16[8@dp]"], {}, (), None, "f32[8@dp]"),
    ("to", ["f32[8@dp]{P:tp}"], {"dtype": "bfloat16"}, (), None, "bf16[8@dp]{P:tp}"),
    ("dropout", ["[8@dp]"], {"p": 0.1}, (), None, "[8@dp]"),
    ("expand_as", ["[16]", "[8@dp,16]"], {}, (), None, "[8@dp,16]"),
    # matmul family: einsum labels; labels absent from the output are summed
    ("matmul", ["[?@dp,?]", "[?,?@tp]"], {}, (), None, "[?@dp,?@tp]"),
    ("matmul", ["f32[4@dp,8,16]", "f32[16,32@tp]"], {}, (), None, "f32[4@dp,8,32@tp]"),
    ("matmul", ["[?@dp,?,?]", "[?@dp,?,?]"], {}, (), None, "[?@dp,?,?]"),
    ("matmul", ["[8]", "[8,4@tp]"], {}, (), None, "[4@tp]"),
    ("matmul", ["[?,?@tp]", "[?@tp,?]"], {}, ("tp",), None, "[?,?]{P:tp}"),
    ("__matmul__", ["[?,?@tp]{P:dp}", "[?@tp,?]"], {}, "tp", None, "[?,?]{P:(dp,tp)}"),
    ("mm", ["f32[8@dp,16]", "f32[16,32@tp]"], {}, (), None, "f32[8@dp,32@tp]"),
    ("bmm", ["[2@dp,8,16]", "[2@dp,16,4]"], {}, (), None, "[2@dp,8,4]"),
    ("linear", ["[?@dp,?,64]", "[128@tp,64]"], {}, (), None, "[?@dp,?,128@tp]"),
    ("linear", ["[?@dp,?,64]", "[128@tp,64]", "[128@tp]"], {}, (), None, "[?@dp,?,128@tp]"),
    # row-parallel: sharded contraction declared partial, bias already partial
    ("linear", ["[?@dp,64@tp]", "[128,64@tp]", "[128]{P:tp}"], {}, ("tp",), None, "[?@dp,128]{P:tp}"),
    ("einsum", ["[?@dp,?,?]", "[?,?@tp]"], {"equation": "bsh,hf->bsf"}, (), None, "[?@dp,?,?@tp]"),
    ("einsum", ["[?,?@tp]", "[?@tp,?]"], {"equation": "ij,jk"}, ("tp",), None, "[?,?]{P:tp}"),
    ("einsum", ["[?@dp,?,?,?]", "[?,?@tp]"], {"equation": "...ij,jk->...ik"}, (), None, "[?@dp,?,?,?@tp]"),
    ("einsum", ["[?@dp,?]"], {"equation": "ij->ji"}, (), None, "[?,?@dp]"),
    ("einsum", ["[?,?@tp]"], {"equation": "ij->i"}, ("tp",), None, "[?]{P:tp}"),
    ("addmm", ["[32@tp]", "[8,16]", "[16,32@tp]"], {}, (), None, "[8,32@tp]"),
    ("dot", ["[16@tp]", "[16@tp]"], {}, ("tp",), None, "[]{P:tp}"),
    ("outer", ["[4@dp]", "[8@tp]"], {}, (), None, "[4@dp,8@tp]"),
    # reductions
    ("sum", ["f32[8@dp,16@tp]"], {"dim": 1}, ("tp",), None, "f32[8@dp]{P:tp}"),
    ("sum", ["f32[8@dp,16]"], {"dim": 1}, (), None, "f32[8@dp]"),
    ("sum", ["f32[8@dp,16]"], {"dim": -1, "keepdim": True}, (), None, "f32[8@dp,1]"),
    ("sum", ["f32[8@dp,16@tp]"], {}, ("dp", "tp"), None, "f32[]{P:(dp,tp)}"),
    ("mean", ["[8@dp,16]{P:tp}"], {"dim": 1}, (), None, "[8@dp]{P:tp}"),
    ("amax", ["[8@dp,16]"], {"dim": 1}, (), None, "[8@dp]"),
    ("argmax", ["f32[8@dp,16]"], {"dim": 1}, (), None, "i64[8@dp]{nograd}"),
    # need-replication along a dim
    ("softmax", ["[8@dp,16]"], {"dim": -1}, (), None, "[8@dp,16]"),
    ("log_softmax", ["f32[8@dp,16]{I:tp}"], {"dim": 1}, (), None, "f32[8@dp,16]{I:tp}"),
    ("cumsum", ["[8@dp,16]{P:tp}"], {"dim": 1}, (), None, "[8@dp,16]{P:tp}"),
    ("sort", ["[8@dp,16]"], {}, (), None, "[8@dp,16]"),
    ("topk", ["f32[8@dp,16]"], {"k": 4}, (), None, "f32[8@dp,4]"),
    ("flip", ["[8@dp,16]"], {"dims": (1,)}, (), None, "[8@dp,16]"),
    ("roll", ["[8@dp,16]"], {"shifts": 1, "dims": 1}, (), None, "[8@dp,16]"),
    ("layer_norm", ["f32[8@dp,?,64]", "f32[64]", "f32[64]"], {"normalized_shape": (64,)}, (), None, "f32[8@dp,?,64]"),
    ("rms_norm", ["[8@dp,64]", "[64]"], {}, (), None, "[8@dp,64]"),
    # view / reshape / flatten / unflatten
    ("view", ["f32[8@dp,16]"], {"shape": (8, 4, 4)}, (), None, "f32[8@dp,4,4]"),
    ("reshape", ["f32[8@dp,4,4]"], {"shape": (8, -1)}, (), None, "f32[8@dp,16]"),
    ("view", ["f32[8@x]"], {"shape": (2, 4)}, (), {"x": 2}, "f32[2@x,4]"),
    ("view", ["f32[8@x]"], {"shape": (2, 4)}, (), None, "f32[2@x,4]"),  # mesh unknown: assumed to divide
    ("view", ["f32[8@(x,y)]"], {"shape": (2, 4)}, (), {"x": 2, "y": 4}, "f32[2@x,4@y]"),
    ("view", ["f32[2@x,4@y]"], {"shape": (8,)}, (), {"x": 2, "y": 4}, "f32[8@(x,y)]"),
    ("view", ["f32[4@x,4]"], {"shape": (16,)}, (), None, "f32[16@x]"),
    ("view", ["f32[6@x,4]"], {"shape": (4, 6)}, (), {"x": 2}, "f32[4@x,6]"),
    ("view", ["[?,?]{P:tp}"], {"shape": (4, -1, 2)}, (), None, "[4,?,2]{P:tp}"),
    ("view", ["[?@dp,?]"], {"shape": (-1,)}, (), None, "[?@dp]"),
    ("view", ["[?@dp]"], {"shape": (4, -1)}, (), None, "[4@dp,?]"),
    ("flatten", ["[?@dp,?,?]"], {"start_dim": 0, "end_dim": 1}, (), None, "[?@dp,?]"),
    ("flatten", ["f32[2@dp,3,4]"], {}, (), None, "f32[24@dp]"),
    ("flatten", ["f32[2@x,3@y]"], {}, (), {"x": 2}, "f32[6@(x,y)]"),  # x leaves one row per rank
    ("ravel", ["[?@dp,?]"], {}, (), None, "[?@dp]"),
    ("unflatten", ["[?@dp,?]"], {"dim": 1, "sizes": (4, -1)}, (), None, "[?@dp,4,?]"),
    ("unflatten", ["f32[64@tp]"], {"dim": 0, "sizes": (8, -1)}, (), {"tp": 4}, "f32[8@tp,8]"),
    ("unflatten", ["f32[64@(dp,tp)]"], {"dim": 0, "sizes": (2, 32)}, (), {"dp": 2, "tp": 4}, "f32[2@dp,32@tp]"),
    # permutations of dims
    ("transpose", ["f32[4@dp,8]{P:tp}"], {"dim0": 0, "dim1": 1}, (), None, "f32[8,4@dp]{P:tp}"),
    ("permute", ["[2@dp,3,4@tp]"], {"dims": (2, 0, 1)}, (), None, "[4@tp,2@dp,3]"),
    ("movedim", ["[2@dp,3,4]"], {"source": 0, "destination": -1}, (), None, "[3,4,2@dp]"),
    ("t", ["[2@dp,3]"], {}, (), None, "[3,2@dp]"),
    ("swapaxes", ["[2@dp,3]"], {"axis0": 0, "axis1": 1}, (), None, "[3,2@dp]"),
    ("squeeze", ["[2@dp,1,3]"], {"dim": 1}, (), None, "[2@dp,3]"),
    ("squeeze", ["[2@dp,1,3]"], {}, (), None, "[2@dp,3]"),
    ("unsqueeze", ["[2@dp,3]"], {"dim": 1}, (), None, "[2@dp,1,3]"),
    ("expand", ["[2@dp,1]"], {"size": (2, 5)}, (), None, "[2@dp,5]"),
    ("expand", ["[2@dp,1]"], {"size": (3, -1, 5)}, (), None, "[3,2@dp,5]"),
    ("broadcast_to", ["[1,4@tp]"], {"shape": (3, 4)}, (), None, "[3,4@tp]"),
    # cat / stack
    ("cat", ["[2,4@tp]", "[3,4@tp]"], {"dim": 0}, (), None, "[5,4@tp]"),
    ("cat", ["[?@dp,?]{P:tp}", "[?@dp,?]{P:tp}"], {"dim": 1}, (), None, "[?@dp,?]{P:tp}"),
    ("stack", ["[4@dp]", "[4@dp]", "[4@dp]"], {"dim": 1}, (), None, "[4@dp,3]"),
    # slicing
    ("narrow", ["[8@dp,16]"], {"dim": 1, "start": 0, "length": 4}, (), None, "[8@dp,4]"),
    ("select", ["[8@dp,16]"], {"dim": 1, "index": 0}, (), None, "[8@dp]"),
    ("split", ["[8@dp,16]"], {"split_size_or_sections": 4, "dim": 1}, (), None, "[8@dp,4]"),
    ("chunk", ["[8@dp,16]"], {"chunks": 2, "dim": -1}, (), None, "[8@dp,8]"),
    ("unbind", ["[3,8@dp]"], {"dim": 0}, (), None, "[8@dp]"),
    ("__getitem__", ["[4@dp,8,6]"], {"index": (slice(None), slice(2, 6), 0)}, (), None, "[4@dp,4]"),
    ("__getitem__", ["[4@dp,8]"], {"index": (Ellipsis, None)}, (), None, "[4@dp,8,1]"),
    ("__getitem__", ["[4@dp,8]{P:tp}"], {"index": (slice(None), "int")}, (), None, "[4@dp]{P:tp}"),
    # indexing
    ("index_select", ["f32[8@dp,16]", "i64[5]{nograd}"], {"dim": 1}, (), None, "f32[8@dp,5]"),
    ("index_select", ["f32[8,16]{P:tp}", "i64[5@dp]{nograd}"], {"dim": 0}, (), None, "f32[5@dp,16]{P:tp}"),
    ("gather", ["f32[8@dp,16]", "i64[8@dp,4]{nograd}"], {"dim": 1}, (), None, "f32[8@dp,4]"),
    ("embedding", ["i64[?@dp,?]{nograd}", "f32[1000,64@tp]"], {}, (), None, "f32[?@dp,?,64@tp]"),
    # conv: batch and out-channels pass, in-channels sum, spatial dims are windows
    ("conv2d", ["f32[8@dp,3,32,32]", "f32[16@tp,3,3,3]", "f32[16@tp]"], {}, (), None, "f32[8@dp,16@tp,?,?]"),
    ("conv1d", ["f32[8,4@tp,32]", "f32[16,4@tp,3]"], {}, ("tp",), None, "f32[8,16,?]{P:tp}"),
]


@pytest.mark.parametrize(
    "op, operands, params, out, mesh, result",
    ACCEPTED,
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_accepted(op, operands, params, out, mesh, result) -> None:
    assert str(run(op, operands, params, out, mesh)) == result


# -- rejected: (op, operands, params, out, mesh, code, message fragments, fix) ----------

REJECTED = [
    ("add", ["[8@dp]", "[8@tp]"], {}, (), None, "conflicting-axes",
     ["add: the factor of dim 0 of a and dim 0 of b is sharded on 'dp' in a: [8@dp] but on 'tp' in b: [8@tp]; "
      "operands sharing a dim must carry identical axes"],
     "spmd.redistribute(b, src=Spmd(spec=PartitionSpec('tp')), dst=Spmd(spec=PartitionSpec('dp')))"),
    ("einsum", ["[?@dp,?]", "[?@tp,?]"], {"equation": "ij,ik->jk"}, (), None, "conflicting-axes",
     ["factor 'i' (dim 0 of a and dim 0 of b)", "but on 'tp' in b"], None),
    ("matmul", ["[?,?@tp]", "[?@tp,?]"], {}, ("dp",), None, "out-partial-mismatch",
     ["matmul: out_partial_axes=('dp',) but the sharded summed dims are on 'tp' (a: [?,?@tp]; b: [?@tp,?]); "
      "a result is Partial exactly on the axes of its sharded summed dims"],
     "spmd.matmul(a, b, out_partial_axes=('tp',))"),
    ("matmul", ["[?,?]", "[?,?]"], {}, ("tp",), None, "out-partial-mismatch",
     ["no summed dim is sharded"], "spmd.matmul(a, b)"),
    ("add", ["[8]", "[8]"], {}, ("tp",), None, "out-partial-mismatch", ["add sums over no dim"], "spmd.add(a, b)"),
    ("log_softmax", ["[8@dp,16@tp]"], {"dim": 0}, (), None, "need-replication",
     ["dim 0 of x: [8@dp,16@tp] is sharded on 'dp', but log_softmax normalises over it"],
     "spmd.all_gather(x, 'dp', src=S(0), dst=R)"),
    ("softmax", ["[8@(dp,tp)]"], {"dim": 0}, (), None, "need-replication", ["sharded on ('dp', 'tp')"],
     "spmd.redistribute(x, src=Spmd(spec=PartitionSpec(('dp', 'tp'))), dst=Spmd(spec=PartitionSpec(None)))"),
    ("sort", ["[8@dp,16@tp]"], {}, (), None, "need-replication", ["sort orders along it"],
     "spmd.all_gather(x, 'tp', src=S(1), dst=R)"),
    ("topk", ["[8@dp,16@tp]"], {"k": 2}, (), None, "need-replication", ["topk ranks along it"], None),
    ("layer_norm", ["[8@dp,64]", "[64@tp]"], {}, (), None, "need-replication",
     ["dim 0 of b: [64@tp] is sharded on 'tp', but layer_norm normalises over it"],
     "spmd.all_gather(b, 'tp', src=S(0), dst=R)"),
    ("index_select", ["[8@dp,16]", "i64[4]"], {"dim": 0}, (), None, "need-replication",
     ["the index selects along it"], "spmd.all_gather(a, 'dp', src=S(0), dst=R)"),
    ("gather", ["[8,16@tp]", "i64[8,4]"], {"dim": 1}, (), None, "need-replication", ["the index selects along it"], None),
    ("embedding", ["i64[?@dp]", "f32[1000@tp,64]"], {}, (), None, "need-replication",
     ["dim 0 of b: f32[1000@tp,64] is sharded on 'tp', but the indices select rows of it"],
     "spmd.all_gather(b, 'tp', src=S(0), dst=R)"),
    ("squeeze", ["[2@dp,1@tp]"], {"dim": 1}, (), None, "need-replication", ["squeeze removes it"], None),
    ("split", ["[8@dp,16]"], {"split_size_or_sections": 4}, (), None, "permutation", ["split cuts it into pieces"],
     "spmd.all_gather(x, 'dp', src=S(0), dst=R)"),
    ("select", ["[8@dp,16]"], {"dim": 0, "index": 3}, (), None, "permutation", ["select picks one index of it"], None),
    ("__getitem__", ["[8@dp,16]"], {"index": 0}, (), None, "permutation", ["indexing picks one index of it"], None),
    ("flip", ["[8@dp,16]"], {"dims": (0,)}, (), None, "permutation", ["flip reverses it"], None),
    ("conv1d", ["[8,4,32@sp]", "[16,4,3]"], {}, (), None, "permutation",
     ["the convolution window crosses shard boundaries"], "spmd.all_gather(a, 'sp', src=S(2), dst=R)"),
    ("conv1d", ["[8,4,32]", "[16,4,3@tp]"], {}, (), None, "need-replication", ["it is the convolution window"], None),
    ("conv1d", ["[8,4@tp,32]", "[16,4@tp,3]"], {}, (), None, "needs-out-partial",
     ["conv1d: dim 1 of a and dim 1 of b are summed over and sharded on 'tp'"],
     "spmd.conv1d(a, b, out_partial_axes=('tp',))"),
    ("mean", ["[8@dp,16@tp]"], {"dim": 1}, ("tp",), None, "reduce-sharded",
     ["mean: dim 1 of x: [8@dp,16@tp] is sharded on 'tp' and reduced by mean; each rank would hold the mean "
      "of its shard, which no type describes (P is a pending sum only); for a mean, sum with "
      "out_partial_axes and divide by the full size"],
     "spmd.all_gather(x, 'tp', src=S(1), dst=R)"),
    ("amax", ["[8@dp,16@tp]"], {"dim": -1}, (), None, "reduce-sharded", ["reduced by max"], None),
    ("einsum", ["[?,?,?]", "[?@tp,?]"], {"equation": "ijk,kl->il"}, (), None, "sharded-replicated",
     ["factor 'k' (dim 0 of b and dim 2 of a) is sharded on 'tp' in b: [?@tp,?] but not in a: [?,?,?]"],
     "spmd.convert(a, 'tp', src=R, dst=S(2))"),
    ("stack", ["[4@dp]", "[4]"], {}, (), None, "sharded-replicated", ["but not in b: [4]"],
     "spmd.convert(b, 'dp', src=R, dst=S(0))"),
    ("unsqueeze", ["[4]"], {"dim": 3}, (), None, "bad-param", ["out of range"], ""),
    ("unflatten", ["f32[12@x]"], {"dim": 0, "sizes": (2, 6)}, (), {"x": 3}, "not-divisible",
     ["the part of that dim it would shard has size 2, which 3 does not divide"],
     "spmd.all_gather(x, 'x', src=S(0), dst=R)"),
    ("matmul", ["[?@tp,?,?]", "[?,?@tp]"], {}, (), None, "axis-twice",
     ["mesh axis 'tp' would shard result dim 0 and also shard result dim 2"],
     "spmd.all_gather(b, 'tp', src=S(1), dst=R)"),
    ("sum", ["[8@dp,4]"], {"dim": 0}, (), None, "needs-out-partial", [],
     "spmd.sum(x, dim=0, out_partial_axes=('dp',))"),
    ("broadcast_to", ["[1@dp,4]"], {"shape": (3, 4)}, (), None, "broadcast-sharded",
     ["broadcast_to: dim 0 of x: [1@dp,4] is broadcast (size 1) but sharded on 'dp'"], None),
    ("add", ["[1@dp]", "[8]"], {}, (), None, "broadcast-sharded",
     ["add: dim 0 of a: [1@dp] is broadcast (size 1) but sharded on 'dp'"],
     "spmd.all_gather(a, 'dp', src=S(0), dst=R)"),
    ("flatten", ["[?,?@x,?]"], {"start_dim": 0, "end_dim": 1}, (), None, "reshape-minor",
     ["flatten: dim 1 of x: [?,?@x,?] is sharded on 'x' but is not the major part of result dim 0; "
      "the ranks' pieces would interleave"],
     "spmd.all_gather(x, 'x', src=S(1), dst=R)"),
    ("view", ["f32[4@x,4@y]"], {"shape": (16,)}, (), {"x": 2, "y": 4}, "reshape-minor",
     ["dim 1 of x: f32[4@x,4@y] is sharded on 'y'"], None),
    ("view", ["f32[12@x]"], {"shape": (2, 6)}, (), {"x": 3}, "not-divisible",
     ["view: axis 'x' (size 3) shards dim 0 of x: f32[12@x], but the part of that dim it would shard has "
      "size 2, which 3 does not divide"],
     "spmd.all_gather(x, 'x', src=S(0), dst=R)"),
    ("view", ["[?@x,?]"], {"shape": (4, 4, -1)}, (), None, "unknown-sizes",
     ["view: x: [?@x,?] is sharded and its sizes are not all known"], "spmd.all_gather(x, 'x', src=S(0), dst=R)"),
    ("reshape", ["[?@x,?@y]"], {"shape": (4, 4, -1)}, (), None, "unknown-sizes", [],
     "spmd.redistribute(x, src=Spmd(spec=PartitionSpec('x', 'y')), dst=Spmd(spec=PartitionSpec(None, None)))"),
    ("add", ["[8@tp]", "[]{V:tp}"], {}, (), None, "local-global-mixed",
     ["add: axis 'tp' shards a: [8@tp] but b: []{V:tp} is Varying on it (local mode); a global and a "
      "local value do not mix"],
     "spmd.all_gather(a, 'tp', src=S(0), dst=R)"),
    ("embedding", ["i64[?]{P:tp}", "f32[10,4]"], {}, (), None, "partial-index",
     ["embedding on axis 'tp': the index a: i64[?]{P:tp} is Partial"], "spmd.all_reduce(a, 'tp', src=P, dst=R)"),
    ("add", ["[8]{P:tp}", "[8]"], {}, (), None, "partial-mixed",
     ["add on axis 'tp' (a is P, b is R): a Partial operand is added to a non-Partial one"],
     "spmd.all_reduce(a, 'tp', src=P, dst=R)"),
    ("linear", ["[?,64@tp]", "[128,64@tp]", "[128]"], {}, ("tp",), None, "partial-mixed",
     ["linear on axis 'tp': the product is P and the bias c is R"], "spmd.convert(c, 'tp', src=R, dst=P)"),
    ("add", ["[8]{P:tp}", 1.0], {}, (), None, "partial-scalar", ["a Python scalar is added to a Partial operand"],
     "spmd.all_reduce(a, 'tp', src=P, dst=R)"),
    ("mul", ["[8]{P:tp}", "[8]{P:tp}"], {}, (), None, "partial-product", ["two Partial operands are multiplied"], None),
    ("div", ["[8]", "[8]{P:tp}"], {}, (), None, "partial-denominator",
     ["a Partial value is a denominator"], "spmd.all_reduce(b, 'tp', src=P, dst=R)"),
    ("mul", ["[]{P:tp}", "[8@tp]"], {}, (), None, "partial-mixed", ["(a is P, b is S(0))"], None),
    ("add", ["[8]{I:tp}", "[8]"], {}, (), None, "invariant-mixed",
     ["add on axis 'tp' (a is I, b is R): an Invariant operand is mixed with R operands"],
     "spmd.convert(a, 'tp', src=I, dst=R)"),
    ("amax", ["[8]{P:tp}"], {"dim": 0}, (), None, "partial-nonlinear", ["a Partial operand enters a nonlinear op"], None),
    ("sort", ["[8]{P:tp}"], {}, (), None, "partial-nonlinear", [], None),
    # bad literal arguments
    ("softmax", ["[8]"], {}, (), None, "bad-param", ["softmax: needs the literal argument 'dim'"], ""),
    ("softmax", ["[8]"], {"dim": 1}, (), None, "bad-param", ["out of range"], ""),
    ("matmul", ["[]", "[4]"], {}, (), None, "bad-param", ["does not take rank-0 operands"], ""),
    ("mm", ["[4]", "[4,4]"], {}, (), None, "bad-param", ["term 'ij' needs rank 2, operand 0 has rank 1"], ""),
    ("einsum", ["[4]"], {"equation": "i,j->ij"}, (), None, "bad-param", ["has 2 operands, got 1 tensors"], ""),
    ("einsum", ["[4]"], {"equation": "i->k"}, (), None, "bad-param", ["output label 'k'"], ""),
    ("permute", ["[4,4]"], {"dims": (0, 0)}, (), None, "bad-param", ["repeats a dim"], ""),
    ("view", ["[4,4]"], {"shape": (5, -1)}, (), None, "bad-param", ["cannot view 16 elements"], ""),
    ("add", ["[3]", "[4]"], {}, (), None, "bad-param", ["do not broadcast"], ""),
    ("cat", ["[3]", "[3,4]"], {}, (), None, "bad-param", ["one rank"], ""),
    ("add", ["[3]", None], {}, (), None, "bad-param", ["neither a GlobalType nor a number"], ""),
    ("frobnicate", ["[3]"], {}, (), None, "no-rule", ["frobnicate: no global shard-propagation rule"], ""),
    ("__getitem__", ["[3]"], {"index": ("tensor",)}, (), None, "no-rule", ["advanced indexing"], ""),
]


@pytest.mark.parametrize(
    "op, operands, params, out, mesh, code, fragments, fix",
    REJECTED,
    ids=[f"{c[0]}-{c[5]}-{k}" for k, c in enumerate(REJECTED)],
)
def test_rejected(op, operands, params, out, mesh, code, fragments, fix) -> None:
    with pytest.raises(FactorError) as info:
        run(op, operands, params, out, mesh)
    err = info.value
    assert err.code == code
    for fragment in fragments:
        assert fragment in str(err)
    if fix is not None:
        assert err.fix == fix


def test_every_rule_has_a_rejected_case() -> None:
    covered = {c[5] for c in REJECTED} | {c[-3] for c in COLLECTIVE_REJECTED}
    assert covered == set(RULES)


def test_every_family_has_an_accepted_and_a_rejected_case() -> None:
    families = {row.family for row in FACTOR_TABLE.values()}
    accepted = {FACTOR_TABLE[c[0]].family for c in ACCEPTED}
    rejected = {FACTOR_TABLE[c[0]].family for c in REJECTED if c[0] in FACTOR_TABLE}
    assert accepted == families
    assert rejected == families
    for name in ("matmul", "mm", "bmm", "linear", "einsum", "sum", "mean", "amax", "view", "reshape", "flatten",
                 "unflatten", "transpose", "permute", "squeeze", "unsqueeze", "expand", "cat", "stack", "narrow",
                 "select", "split", "index_select", "gather", "embedding", "softmax", "log_softmax", "layer_norm",
                 "rms_norm", "cumsum", "sort", "topk", "conv1d", "conv2d", "add", "mul"):
        assert has_rule(name), name
    assert not has_rule("frobnicate")


# -- stricter than JAX on purpose (notes/typing-rules.md) --------------------------------


def test_strict_sharded_plus_replicated_on_one_dim() -> None:
    with pytest.raises(FactorError) as info:
        run("add", ["[8@dp,16]", "[8,16]"])
    assert info.value.code == "sharded-replicated"
    assert str(info.value) == (
        "add: the factor of dim 0 of a and dim 0 of b is sharded on 'dp' in a: [8@dp,16] but not in b: [8,16]; "
        "operands sharing a dim must be sharded on it alike (JAX would slice the replicated one)"
    )
    assert info.value.fix == "spmd.convert(b, 'dp', src=R, dst=S(0))"


def test_strict_contraction_sharded_on_one_side() -> None:
    with pytest.raises(FactorError) as info:
        run("matmul", ["[?,?@tp]", "[?,?]"])
    assert info.value.code == "sharded-replicated"
    assert str(info.value) == (
        "matmul: factor 'k' (dim 1 of a and dim 0 of b) is sharded on 'tp' in a: [?,?@tp] but not in b: [?,?]; "
        "a contraction over a dim sharded on one side only would need an all-reduce; shard both sides alike "
        "and pass out_partial_axes"
    )
    assert info.value.fix == "spmd.convert(b, 'tp', src=R, dst=S(0))"


def test_strict_sum_softmax_layer_norm_over_a_sharded_dim() -> None:
    with pytest.raises(FactorError) as info:
        run("sum", ["f32[8@dp,16@tp]"], {"dim": 1})
    assert info.value.code == "needs-out-partial"
    assert str(info.value) == (
        "sum: dim 1 of x is summed over and sharded on 'tp' (x: f32[8@dp,16@tp]); each rank computes a partial "
        "sum, so the result is Partial on 'tp': declare it with out_partial_axes"
    )
    assert info.value.fix == "spmd.sum(x, dim=1, out_partial_axes=('tp',))"
    with pytest.raises(FactorError) as info:
        run("softmax", ["[8@dp,16@tp]"], {"dim": -1})
    assert info.value.code == "need-replication"
    assert str(info.value) == (
        "softmax: dim 1 of x: [8@dp,16@tp] is sharded on 'tp', but softmax normalises over it: the op needs "
        "the whole dim on every rank (gather it first)"
    )
    assert info.value.fix == "spmd.all_gather(x, 'tp', src=S(1), dst=R)"
    with pytest.raises(FactorError) as info:
        run("layer_norm", ["f32[8@dp,16@tp]"], {"normalized_shape": (16,)})
    assert info.value.code == "need-replication"
    assert "layer_norm normalises over it" in str(info.value)


def test_strict_concat_along_a_sharded_dim() -> None:
    with pytest.raises(FactorError) as info:
        run("cat", ["[?@dp,?]", "[?@dp,?]"], {"dim": 0})
    assert info.value.code == "need-replication"
    assert str(info.value) == (
        "cat: dim 0 of a: [?@dp,?] is sharded on 'dp', but cat concatenates along it: the op needs the whole "
        "dim on every rank (gather it first)"
    )
    assert info.value.fix == "spmd.all_gather(a, 'dp', src=S(0), dst=R)"


def test_strict_slicing_a_sharded_dim() -> None:
    with pytest.raises(FactorError) as info:
        run("narrow", ["[8@dp,16]"], {"dim": 0, "start": 0, "length": 4})
    assert info.value.code == "permutation"
    assert str(info.value) == (
        "narrow: dim 0 of x: [8@dp,16] is sharded on 'dp', but narrow keeps a slice of it: the op would move "
        "elements across shard boundaries (gather it first)"
    )
    with pytest.raises(FactorError) as info:
        run("__getitem__", ["[8,16@tp]"], {"index": (slice(None), slice(0, 4))})
    assert info.value.code == "permutation"
    assert "indexing keeps part of it" in str(info.value)
    assert info.value.fix == "spmd.all_gather(x, 'tp', src=S(1), dst=R)"


# -- where JAX and this project agree -----------------------------------------------------


def test_agree_conflicting_axes_on_one_dim() -> None:
    with pytest.raises(FactorError) as info:
        run("mul", ["[8@dp,4]", "[8@tp,4]"])
    assert info.value.code == "conflicting-axes"


def test_agree_axis_used_twice_in_a_result() -> None:
    with pytest.raises(FactorError) as info:
        run("einsum", ["[?@tp,?]", "[?,?@tp]"], {"equation": "ij,jk->ik"})
    assert info.value.code == "axis-twice"
    assert str(info.value) == (
        "einsum: mesh axis 'tp' would shard result dim 0 and also shard result dim 1 (a: [?@tp,?]; "
        "b: [?,?@tp]); an axis can appear only once in a type"
    )
    assert info.value.fix == "spmd.all_gather(b, 'tp', src=S(1), dst=R)"
    # a summed axis that also shards a result dim
    with pytest.raises(FactorError) as info:
        run("einsum", ["[?@tp,?]", "[?,?@tp]", "[?@tp,?]"], {"equation": "ij,jk,kl->il"}, ("tp",))
    assert info.value.code == "axis-twice"
    assert "mesh axis 'tp' would shard result dim 0 and also be partial" in str(info.value)
    assert info.value.fix == "spmd.all_gather(a, 'tp', src=S(0), dst=R)"
    # batch dims of matmul: the batch of a and the columns of b on one axis
    with pytest.raises(FactorError) as info:
        run("matmul", ["[?@tp,?,?]", "[?,?@tp]"])
    assert info.value.code == "axis-twice"


def test_agree_contraction_sharded_on_both_sides_needs_out_partial_axes() -> None:
    with pytest.raises(FactorError) as info:
        run("matmul", ["[?,?@tp]", "[?@tp,?]"])
    assert info.value.code == "needs-out-partial"
    assert str(info.value) == (
        "matmul: dim 1 of a and dim 0 of b are summed over and sharded on 'tp' (a: [?,?@tp]; b: [?@tp,?]); "
        "each rank computes a partial sum, so the result is Partial on 'tp': declare it with out_partial_axes"
    )
    assert info.value.fix == "spmd.matmul(a, b, out_partial_axes=('tp',))"
    # the seed's worked example: row-parallel linear in one step
    assert str(run("linear", ["[?,?@tp]", "[?,?@tp]"], {}, ("tp",))) == "[?,?]{P:tp}"


def test_agree_nonlinear_op_on_a_partial_value() -> None:
    with pytest.raises(FactorError) as info:
        run("softmax", ["[?@dp,?]{P:tp}"], {"dim": -1})
    assert info.value.code == "partial-nonlinear"
    assert str(info.value) == (
        "softmax on axis 'tp' (x is P): a Partial operand enters a nonlinear op; the op would be applied to "
        "each rank's addend instead of to their sum"
    )
    assert info.value.fix == "spmd.all_reduce(x, 'tp', src=P, dst=R)"


def test_agree_cumsum_over_a_sharded_dim() -> None:
    with pytest.raises(FactorError) as info:
        run("cumsum", ["[8@dp,16]"], {"dim": 0})
    assert info.value.code == "need-replication"
    assert "a cumulative op runs along it" in str(info.value)


def test_reshape_that_splits_an_axis_gives_sub_axes() -> None:
    # Shardy's own example: [8@x] with x=4 viewed as (2, 4) is [2@x:(1)2, 4@x:(2)2]:
    # device x=c holds elements 2c, 2c+1, i.e. row c // 2, columns 2(c % 2) .. +2.
    split = run("view", ["f32[8@x]"], {"shape": (2, 4)}, (), {"x": 4})
    assert str(split) == "f32[2@x:(1)2,4@x:(2)2]"
    # merging back gives the full axis, never the two parts
    assert str(run("reshape", [split], {"shape": (8,)}, (), {"x": 4})) == "f32[8@x]"
    # a different split of the same elements: the parts merge where they meet
    assert str(run("reshape", [split], {"shape": (4, 2)}, (), {"x": 4})) == "f32[4@x,2]"
    assert str(run("unflatten", ["f32[64@tp]"], {"dim": 0, "sizes": (2, 32)}, (), {"tp": 8})) == (
        "f32[2@tp:(1)2,32@tp:(2)4]"
    )
    # the minor part of a sharded dim that the axis fills: [8@x,6] on x=8 -> (2, 24)
    assert str(run("view", ["f32[8@x,6]"], {"shape": (2, 24)}, (), {"x": 8})) == "f32[2@x:(1)2,24@x:(2)4]"
    # an axis split in three: x=8 over (2, 2, 2)
    assert str(run("view", ["f32[8@x]"], {"shape": (2, 2, 2)}, (), {"x": 8})) == (
        "f32[2@x:(1)2,2@x:(2)2,2@x:(4)2]"
    )
    # a sub-axis operand splits again: x:(2)4 over (2, 4) of a dim of 8
    assert str(run("view", ["f32[2@x:(1)2,8@x:(2)4]"], {"shape": (2, 2, 4)}, (), {"x": 8})) == (
        "f32[2@x:(1)2,2@x:(2)2,4@x:(4)2]"
    )


def test_sub_axes_follow_the_other_rules() -> None:
    t = g("f32[2@x:(1)2,4@x:(2)2]")
    assert run("add", [t, t]) == t
    with pytest.raises(FactorError) as info:
        run("add", [t, g("f32[2@x,4]")])
    assert info.value.code == "conflicting-axes"
    # summing a dim sharded on a sub-axis makes the result pending on that sub-axis
    assert str(run("sum", [t], {"dim": 1}, ("x:(2)2",))) == "f32[2@x:(1)2]{P:x:(2)2}"
    with pytest.raises(FactorError) as info:
        run("sum", [t], {"dim": 1})
    assert info.value.code == "needs-out-partial"
    # axes that overlap (x and its part x:(1)2) cannot both land in one result
    with pytest.raises(FactorError) as info:
        run("matmul", [g("[?@x:(1)2,?]"), g("[?,?@x]")])
    assert info.value.code == "axis-twice"
    assert "mesh axis 'x:(1)2' would shard result dim 0 and also shard result dim 1" in str(info.value)


def test_names_are_used_in_messages_and_fixes() -> None:
    with pytest.raises(FactorError) as info:
        propagate("matmul", [g("[?,?@tp]"), g("[?@tp,?]")], {}, names=["hidden", "self.w"])
    assert info.value.fix == "spmd.matmul(hidden, self.w, out_partial_axes=('tp',))"
    assert "dim 1 of hidden and dim 0 of self.w" in str(info.value)


# -- properties --------------------------------------------------------------------------

AXES = ["dp", "tp", "ep"]


@st.composite
def typed(draw: st.DrawFn, rank: int, sizes: Optional[Sequence[int]] = None) -> GlobalType:
    """A global type of this rank: random axes on random dims, some partial."""
    entries: List[List[str]] = [[] for _ in range(rank)]
    partial = []
    for a in draw(st.permutations(AXES)):
        where = draw(st.integers(-2, rank - 1))
        if where >= 0:
            entries[where].append(a)
        elif where == -1 and draw(st.booleans()):
            partial.append(a)
    return GlobalType([tuple(e) if e else None for e in entries], partial, sizes=sizes)


@given(st.data(), st.integers(0, 4))
def test_permute_then_inverse_restores_the_type(data: st.DataObject, rank: int) -> None:
    t = data.draw(typed(rank, data.draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank))))
    perm = data.draw(st.permutations(range(rank)))
    inverse = [perm.index(k) for k in range(rank)]
    there = propagate("permute", [t], {"dims": tuple(perm)})
    assert there.spec.dims == tuple(t.spec.dims[k] for k in perm)  # dim k of the result is dim perm[k]
    assert propagate("permute", [there], {"dims": tuple(inverse)}) == t


@given(st.data(), st.integers(1, 4))
def test_unflatten_then_flatten_restores_the_type(data: st.DataObject, rank: int) -> None:
    t = data.draw(typed(rank))
    d = data.draw(st.integers(0, rank - 1))
    split = propagate("unflatten", [t], {"dim": d, "sizes": (4, -1)})
    assert propagate("flatten", [split], {"start_dim": d, "end_dim": d + 1}) == t


_CASES = [
    ("add", 2, None),
    ("mul", 2, None),
    ("matmul", 2, None),
    ("einsum", 2, {"equation": "ij,jk->ik"}),
    ("transpose", 1, {"dim0": 0, "dim1": -1}),
    ("sum", 1, {"dim": 0}),
    ("cat", 2, {"dim": -1}),
    ("flatten", 1, {}),
    ("softmax", 1, {"dim": -1}),
]


@settings(max_examples=300)
@given(st.data())
def test_propagation_never_invents_or_repeats_an_axis(data: st.DataObject) -> None:
    op, n, params = data.draw(st.sampled_from(_CASES))
    rank = 2 if op == "einsum" else data.draw(st.integers(1, 3))
    ranks = [rank] * n if op in ("cat", "einsum") else [data.draw(st.integers(1, 3)) for _ in range(n)]
    operands = [data.draw(typed(r)) for r in ranks]
    out = data.draw(st.sets(st.sampled_from(AXES)))
    try:
        result = propagate(op, operands, params or {}, out)
    except FactorError as e:
        assert e.code in RULES
        assert str(e).startswith(op)
        return
    used = list(result.spec.axes) + sorted(result.partial)
    assert len(used) == len(set(used))  # no axis twice
    assert set(result.spec.axes) <= {a for t in operands for a in t.spec.axes}  # no sharding invented
    assert result.partial <= out | {a for t in operands for a in t.partial}  # no partial invented


# An independent model of block sharding: which global elements each device holds,
# in the order of its local tensor.
# "w" (size 4) also appears split in two sub-axes w:(1)2, w:(2)2, each placed on its own.
MESH = {"x": 2, "y": 2, "z": 3, "w": 4}
PLACEABLE = ["x", "y", "z", "w", "w:(1)2", "w:(2)2"]


def _size_and_coord(a: str, coord: Mapping[str, int], mesh: Mapping[str, int] = MESH) -> Tuple[int, int]:
    """An axis or sub-axis's size and this device's coordinate along it (Shardy's
    reshape of w's 4 devices into [pre, size, post])."""
    if ":" not in a:
        return mesh[a], coord[a]
    name, rest = a.split(":")
    pre, size = int(rest[1 : rest.index(")")]), int(rest[rest.index(")") + 1 :])
    post = mesh[name] // (pre * size)
    return size, (coord[name] // post) % size


def _local_elements(
    shape: Sequence[int], spec: Sequence[Tuple[str, ...]], coord: Mapping[str, int], mesh: Mapping[str, int] = MESH
) -> Optional[List[int]]:
    ranges = []
    for n, axes in zip(shape, spec):
        count, index = 1, 0
        for a in axes:  # major to minor
            size, c = _size_and_coord(a, coord, mesh)
            index = index * size + c
            count *= size
        if n % count:
            return None
        block = n // count
        ranges.append(range(index * block, (index + 1) * block))
    strides = [math.prod(shape[k + 1 :]) for k in range(len(shape))]
    return [sum(i * s for i, s in zip(ix, strides)) for ix in itertools.product(*ranges)]


def _shapes_of(volume: int, draw: st.DrawFn) -> List[int]:
    rank = draw(st.integers(1, 3))
    out, rest = [], volume
    for _ in range(rank - 1):
        d = draw(st.sampled_from([k for k in range(1, rest + 1) if rest % k == 0]))
        out.append(d)
        rest //= d
    return out + [rest]


@settings(max_examples=400)
@given(st.data())
def test_accepted_reshapes_keep_every_element_in_place(data: st.DataObject) -> None:
    ins = data.draw(st.lists(st.sampled_from([1, 2, 3, 4, 6, 8, 12]), min_size=1, max_size=3))
    assume(math.prod(ins) <= 288)
    outs = _shapes_of(math.prod(ins), data.draw)
    entries: List[List[str]] = [[] for _ in ins]
    split_w = data.draw(st.booleans())
    placeable = [a for a in PLACEABLE if (a.startswith("w:") if split_w else ":" not in a)]
    for a in data.draw(st.permutations(placeable)):
        where = data.draw(st.integers(-1, len(ins) - 1))
        if where >= 0:
            entries[where].append(a)
    spec = [tuple(e) for e in entries]
    coords = [dict(zip(sorted(MESH), c)) for c in itertools.product(*[range(MESH[a]) for a in sorted(MESH)])]
    assume(all(_local_elements(ins, spec, c) is not None for c in coords))
    try:
        t = GlobalType([e or None for e in spec], sizes=ins, dtype="f32")
    except SpecError:  # w:(1)2 then w:(2)2 in one dim is written w
        assume(False)
    try:
        result = propagate("reshape", [t], {"shape": tuple(outs)}, mesh=MESH)
    except FactorError as e:
        assert e.code in ("not-divisible", "reshape-minor", "need-replication"), e
        assert any(spec)  # an unsharded tensor always reshapes
        event(f"rejected: {e.code}")
        return
    event("accepted, sharded" if any(spec) else "accepted, unsharded")
    if any(":" in a for a in result.spec.axes) and not split_w:
        event("accepted, an axis split into sub-axes")
    assert result.sizes == tuple(outs)
    # the same devices shard it: each mesh axis, or the same parts of it
    some = coords[0]
    assert math.prod(_size_and_coord(a, some)[0] for a in result.spec.axes) == math.prod(
        _size_and_coord(a, some)[0] for a in t.spec.axes
    )
    assert {a.split(":")[0] for a in result.spec.axes} == {a.split(":")[0] for a in t.spec.axes}
    for c in coords:
        # the local view of the local tensor must hold the same elements in the same order
        assert _local_elements(outs, result.spec.dims, c) == _local_elements(ins, spec, c)


@settings(max_examples=300)
@given(st.data())
def test_reshapes_of_one_split_axis_keep_every_element_in_place(data: st.DataObject) -> None:
    """One axis (size 2..8) shards one dim; any reshape either keeps every element
    where it is (sub-axes where the axis is split) or is rejected."""
    n = data.draw(st.sampled_from([2, 4, 8]))
    mesh = {"u": n, "v": 2}
    ins = data.draw(st.lists(st.sampled_from([1, 2, 4, 6, 8, 16]), min_size=1, max_size=3))
    assume(math.prod(ins) <= 512)
    d = data.draw(st.integers(0, len(ins) - 1))
    assume(ins[d] % n == 0)
    spec: List[Tuple[str, ...]] = [()] * len(ins)
    spec[d] = ("u",)
    if data.draw(st.booleans()):
        e = data.draw(st.integers(0, len(ins) - 1))
        assume(ins[e] % (2 * (n if e == d else 1)) == 0)
        spec[e] = spec[e] + ("v",)
    outs = _shapes_of(math.prod(ins), data.draw)
    t = GlobalType([x or None for x in spec], sizes=ins)
    coords = [{"u": i, "v": j} for i in range(n) for j in range(2)]
    try:
        result = propagate("reshape", [t], {"shape": tuple(outs)}, mesh=mesh)
    except FactorError as err:
        assert err.code in ("not-divisible", "reshape-minor", "need-replication"), err
        event(f"rejected: {err.code}")
        return
    event("sub-axes" if any(":" in a for a in result.spec.axes) else "whole axes")
    for c in coords:
        assert _local_elements(outs, result.spec.dims, c, mesh) == _local_elements(ins, spec, c, mesh)
    # and back: the inverse reshape gives the original type (sub-axes merge again)
    assert propagate("reshape", [result], {"shape": tuple(ins)}, mesh=mesh) == t


def test_identity_reshape_keeps_the_spec() -> None:
    t = g("f32[4@x,6@(y,z)]")
    assert propagate("view", [t], {"shape": (4, 6)}, mesh=MESH) == t


# -- S(i) collectives on specs (requirement 4) -----------------------------------------------

COLLECTIVE_ACCEPTED = [
    ("f32[8@dp,16@tp]", "all_gather", "tp", S(1), R, {}, "f32[8@dp,16]"),
    ("f32[8@dp,16@tp]", "all_gather", "tp", S(-1), I, {}, "f32[8@dp,16]{I:tp}"),
    ("f32[8@(dp,tp),16]", "all_gather", "tp", S(0), R, {}, "f32[8@dp,16]"),  # the minor axis
    ("f32[8@(dp,tp),16]", "all_gather", ("dp", "tp"), S(0), R, {}, "f32[8,16]"),
    ("f32[8@dp,16]{P:tp}", "reduce_scatter", "tp", P, S(0), {}, "f32[8@(dp,tp),16]"),  # added as minor
    ("f32[8@dp,16]{P:(ep,tp)}", "reduce_scatter", ("ep", "tp"), P, S(1), {}, "f32[8@dp,16@(ep,tp)]"),
    ("f32[8@dp,16]{P:tp}", "all_reduce", "tp", P, R, {}, "f32[8@dp,16]"),
    ("f32[8@dp,16]{P:tp}", "all_reduce", "tp", P, I, {}, "f32[8@dp,16]{I:tp}"),
    ("f32[8@dp,16@tp]", "all_to_all", "tp", S(1), S(0), {}, "f32[8@(dp,tp),16]"),
    ("f32[8@dp,16]", "convert", "tp", R, S(1), {}, "f32[8@dp,16@tp]"),  # a local split
    ("f32[8@dp,16]{I:tp}", "convert", "tp", I, S(0), {}, "f32[8@(dp,tp),16]"),
    ("f32[8@dp,16]", "convert", "tp", R, P, {}, "f32[8@dp,16]{P:tp}"),
    ("f32[8@dp,16@tp]", "convert", "tp", S(1), P, {"expert_mode": True}, "f32[8@dp,16]{P:tp}"),
    ("f32[8@dp,16]{I:tp}", "convert", "tp", I, R, {}, "f32[8@dp,16]"),
    ("f32[8@dp,16]", "reinterpret", "tp", R, I, {"expert_mode": True}, "f32[8@dp,16]{I:tp}"),
    ("f32[8@dp,16]", "redistribute", "dp", S(0), S(1), {}, "f32[8,16@dp]"),
    ("f32[8@dp,16]{P:tp}", "redistribute", "tp", P, S(1), {}, "f32[8@dp,16@tp]"),
    ("f32[8@dp,16]", "redistribute", "tp", R, S(0), {}, "f32[8@(dp,tp),16]"),
    ("bf16[8@dp]{nograd}", "all_gather", "dp", S(0), R, {}, "bf16[8]{nograd}"),
]


@pytest.mark.parametrize("t, op, axis, src, dst, kw, result", COLLECTIVE_ACCEPTED)
def test_collective_accepted(t, op, axis, src, dst, kw, result) -> None:
    assert str(apply_collective(g(t), op, axis, src, dst, **kw)) == result


COLLECTIVE_REJECTED = [
    ("f32[2@x:(1)2,4@x:(2)2]", "all_gather", "x", S(1), R, {}, "split-axis",
     "spmd.all_gather(x, 'x', src=S(1), dst=R) on x: f32[2@x:(1)2,4@x:(2)2]: x holds 'x' as x:(1)2 (dim 0), "
     "x:(2)2 (dim 1); a per-axis op acts on an axis or part the type names: name 'x:(2)2', or use the "
     "spec-level redistribute", ""),
    ("f32[8@x,4]", "all_gather", "x:(2)2", S(0), R, {}, "split-axis", "x holds 'x:(2)2' as x (dim 0)", ""),
    ("f32[8@(dp,tp),16]", "all_gather", "dp", S(0), R, {}, "not-minor",
     "spmd.all_gather(x, 'dp', src=S(0), dst=R) on x: f32[8@(dp,tp),16]: dim 0 is sharded on ('dp', 'tp') "
     "(major to minor) and a per-axis op acts only on its last (minor) axis; use the spec-level redistribute",
     "spmd.redistribute(x, src=Spmd(spec=PartitionSpec(('dp', 'tp'), None)), "
     "dst=Spmd(spec=PartitionSpec('tp', None)))"),
    ("f32[8@(tp,dp),16]", "all_to_all", "tp", S(0), S(1), {}, "not-minor", "acts only on its last (minor) axis",
     "spmd.redistribute(x, src=Spmd(spec=PartitionSpec(('tp', 'dp'), None)), "
     "dst=Spmd(spec=PartitionSpec('dp', 'tp')))"),
    ("f32[8@(dp,tp),16]", "all_gather", ("tp", "dp"), S(0), R, {}, "not-minor", "last (minor) 2 axes, in order",
     None),
    ("f32[8@dp,16@tp]", "all_gather", "tp", S(0), R, {}, "src-mismatch",
     "spmd.all_gather(x, 'tp', src=S(0), dst=R) on x: f32[8@dp,16@tp]: src=S(0) does not match the value "
     "('tp' is S(1))",
     "spmd.all_gather(x, 'tp', src=S(1), dst=R)"),
    ("f32[8@dp,16]{P:tp}", "all_gather", "tp", S(0), R, {}, "src-mismatch", "('tp' is P)",
     "spmd.all_reduce(x, 'tp', src=P, dst=R)"),
    ("f32[8@dp,16]{P:tp}", "all_reduce", "tp", P, S(0), {}, "collective", "is not allowed",
     "spmd.reduce_scatter(x, 'tp', src=P, dst=S(0))"),
    ("f32[8@dp,16]", "convert", "tp", R, I, {}, "collective", "is expert-only", None),
    ("f32[8@dp,16]{V:tp}", "all_gather", "tp", V, R, {}, "varying-form",
     "all_gather(V->R) is a Varying form; it adds or removes a dim", ""),
    ("f32[8@dp,16]", "reinterpret", "tp", R, P, {"expert_mode": True}, "reinterpret-global",
     "reinterpret(R->P) changes the global value", "spmd.convert(x, 'tp', src=R, dst=P)"),
    ("f32[8@dp,16]", "all_gather", "dp", S(2), R, {}, "bad-param", "out of range", ""),
]


@pytest.mark.parametrize("t, op, axis, src, dst, kw, code, fragment, fix", COLLECTIVE_REJECTED)
def test_collective_rejected(t, op, axis, src, dst, kw, code, fragment, fix) -> None:
    with pytest.raises(FactorError) as info:
        apply_collective(g(t), op, axis, src, dst, **kw)
    assert info.value.code == code
    assert fragment in str(info.value)
    if fix is not None:
        assert info.value.fix == fix


@given(st.data(), st.integers(1, 3))
def test_collective_round_trips(data: st.DataObject, rank: int) -> None:
    t = data.draw(typed(rank))
    free = [a for a in AXES if a not in t.axes]
    assume(free)
    a = free[0]
    i, j = data.draw(st.integers(0, rank - 1)), data.draw(st.integers(0, rank - 1))
    # a local split then a gather is the identity on the type
    split = apply_collective(t, "convert", a, R, S(i))
    assert split.spec[i][-1] == a
    assert apply_collective(split, "all_gather", a, S(i), R) == t
    # all_to_all there and back
    moved = apply_collective(split, "all_to_all", a, S(i), S(j))
    assert moved.spec[j][-1] == a
    assert apply_collective(moved, "all_to_all", a, S(j), S(i)) == split
    # reduce_scatter then all_gather == all_reduce
    partial = t.replace(partial=t.partial | {a})
    scattered = apply_collective(partial, "reduce_scatter", a, P, S(i))
    assert apply_collective(scattered, "all_gather", a, S(i), R) == apply_collective(partial, "all_reduce", a, P, R) == t
