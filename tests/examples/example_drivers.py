"""How the tests train each example on a rank, and where each result lives.

A driver makes the full inputs (weights and batch, float64, from a fixed
seed: the same numbers in every process), runs one training step of the
example on one rank (its slice of the batch, its model from
`build_*(full weights, coordinates)`), and returns the rank's tensors: the
output, the loss and every parameter's gradient ("grad.<parameter name>").

`layouts` says, for every result, how the rank's tensor is cut from the full
single-process tensor: a sequence of (mesh axis, tensor dim) steps applied
in order, each keeping this rank's chunk of that dim (an empty sequence: the
rank holds the whole tensor).  `mesh` is the (dp, tp) shape the example runs
on: the 4 ranks as dp=2 x tp=2, or as dp=4 (tp=1: no "tp" axis at all).  The tests cut the reference the same way and
compare rank by rank, so every replica is checked.  `reference` is the
single-process computation (example_references.py).
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Tuple

import torch
from torch import Tensor

import example_references as refs

Tensors = Dict[str, Tensor]
Results = Dict[str, Optional[Tensor]]  # a parameter without gradient has None
Layout = Tuple[Tuple[str, int], ...]
DP, TP = 2, 2
FULL: Layout = ()


@dataclass(frozen=True)
class Driver:
    file: str  # under examples/
    inputs: Callable[[], Tensors]
    run: Callable[[types.ModuleType, Tensors, int, int], Results]
    layouts: Dict[str, Layout]
    reference: Callable[[Tensors], Tensors]
    mesh: Tuple[int, int] = (DP, TP)

    def coords(self, rank: int) -> Tuple[int, int]:
        """(dp, tp) coordinates of a rank (rank = dp * tp_size + tp)."""
        return divmod(rank, self.mesh[1])

    def piece(self, full: Tensor, key: str, rank: int) -> Tensor:
        """Rank `rank`'s piece of result `key`, cut from the full tensor."""
        return cut(full, self.layouts[key], *self.coords(rank), mesh=self.mesh)


def cut(full: Tensor, layout: Layout, dp_rank: int, tp_rank: int, mesh: Optional[Tuple[int, int]] = None) -> Tensor:
    """This rank's piece of `full` under `layout`, on a (dp, tp) mesh (default:
    the module's DP x TP, read at the call: comms_gloo.py sets them per job)."""
    coord = {"dp": dp_rank, "tp": tp_rank}
    dp, tp = mesh if mesh is not None else (DP, TP)
    size = {"dp": dp, "tp": tp}
    t = full
    for axis, dim in layout:
        t = t.chunk(size[axis], dim=dim)[coord[axis]]
    return t


def _randn(gen: torch.Generator, *shape: int, scale: float = 1.0) -> Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale


def _grads(module: torch.nn.Module) -> Results:
    return {f"grad.{n}": p.grad for n, p in module.named_parameters()}


# -- (a) tensor-parallel block ---------------------------------------------------------

BLOCK_HEAD_DIM = 2
BLOCK_SHAPE = dict(batch=4, seq=6, hidden=8, ffn=16)


def _block_inputs() -> Tensors:
    gen = torch.Generator().manual_seed(1)
    b, t, h, f = (BLOCK_SHAPE[k] for k in ("batch", "seq", "hidden", "ffn"))
    return {
        "ln1_w": 1 + _randn(gen, h, scale=0.1),
        "ln1_b": _randn(gen, h, scale=0.1),
        "w_q": _randn(gen, h, h, scale=0.4),
        "w_k": _randn(gen, h, h, scale=0.4),
        "w_v": _randn(gen, h, h, scale=0.4),
        "w_o": _randn(gen, h, h, scale=0.4),
        "b_o": _randn(gen, h, scale=0.5),
        "ln2_w": 1 + _randn(gen, h, scale=0.1),
        "ln2_b": _randn(gen, h, scale=0.1),
        "w_in": _randn(gen, f, h, scale=0.4),
        "b_in": _randn(gen, f, scale=0.1),
        "w_out": _randn(gen, h, f, scale=0.3),
        "b_out": _randn(gen, h, scale=0.5),
        "x": _randn(gen, b, t, h),
        "target": _randn(gen, b, t, h),
    }


def _run_tp_block(mod: types.ModuleType, full: Tensors, dp_rank: int, tp_rank: int) -> Results:
    block = mod.build_block(full, dp_rank, tp_rank, TP, BLOCK_HEAD_DIM)
    x = full["x"].chunk(DP)[dp_rank].clone()
    target = full["target"].chunk(DP)[dp_rank].clone()
    out, loss = mod.train_step(block, x, target, full["target"].numel())
    return {"out": out, "loss": loss, **_grads(block)}


_BLOCK_PARAMS = {
    "ln1_w": "ln1_w", "ln1_b": "ln1_b", "ln2_w": "ln2_w", "ln2_b": "ln2_b",
    "attn.w_q": "w_q", "attn.w_k": "w_k", "attn.w_v": "w_v", "attn.w_o": "w_o", "attn.b_o": "b_o",
    "mlp.w_in": "w_in", "mlp.b_in": "b_in", "mlp.w_out": "w_out", "mlp.b_out": "b_out",
}
_BLOCK_TP_LAYOUT: Dict[str, Layout] = {
    "w_q": (("tp", 0),), "w_k": (("tp", 0),), "w_v": (("tp", 0),), "w_o": (("tp", 1),),
    "w_in": (("tp", 0),), "b_in": (("tp", 0),), "w_out": (("tp", 1),),
}


def _block_reference(full: Tensors) -> Tensors:
    got = refs.transformer_block(full, BLOCK_HEAD_DIM)
    return {"out": got["out"], "loss": got["loss"],
            **{f"grad.{m}": got[f"grad.{r}"] for m, r in _BLOCK_PARAMS.items()}}


TP_BLOCK = Driver(
    file="tp_block.py",
    inputs=_block_inputs,
    run=_run_tp_block,
    layouts={
        "out": (("dp", 0),),
        "loss": FULL,
        **{f"grad.{m}": _BLOCK_TP_LAYOUT.get(r, FULL) for m, r in _BLOCK_PARAMS.items()},
    },
    reference=_block_reference,
)


# -- (b) the same block with sequence parallelism ---------------------------------------


def _run_sp_block(mod: types.ModuleType, full: Tensors, dp_rank: int, tp_rank: int) -> Results:
    block = mod.build_block(full, dp_rank, tp_rank, TP, BLOCK_HEAD_DIM)
    x = cut(full["x"], SEQ_SHARD, dp_rank, tp_rank).clone()
    target = cut(full["target"], SEQ_SHARD, dp_rank, tp_rank).clone()
    out, loss = mod.train_step(block, x, target, full["target"].numel())
    return {"out": out, "loss": loss, **_grads(block)}


SEQ_SHARD: Layout = (("dp", 0), ("tp", 1))

SP_BLOCK = Driver(
    file="sp_block.py",
    inputs=_block_inputs,
    run=_run_sp_block,
    layouts={**TP_BLOCK.layouts, "out": SEQ_SHARD},
    reference=_block_reference,
)


# -- (c) FSDP over dp with tensor parallelism over tp -----------------------------------


def _run_fsdp(mod: types.ModuleType, full: Tensors, dp_rank: int, tp_rank: int) -> Results:
    mlp = mod.build_mlp(full, dp_rank, tp_rank, DP, TP)
    x = full["x"].chunk(DP)[dp_rank].clone()
    target = full["target"].chunk(DP)[dp_rank].clone()
    out, loss = mod.train_step(mlp, x, target, full["target"].numel())
    return {"out": out, "loss": loss, **_grads(mlp)}


def _fsdp_reference(full: Tensors) -> Tensors:
    return refs.mlp(full)


FSDP_TP_MLP = Driver(
    file="fsdp_tp_mlp.py",
    inputs=_block_inputs,
    run=_run_fsdp,
    layouts={
        "out": (("dp", 0),),
        "loss": FULL,
        "grad.w_in": (("tp", 0), ("dp", 0)),
        "grad.b_in": (("tp", 0), ("dp", 0)),
        "grad.w_out": (("tp", 1), ("dp", 0)),
        "grad.b_out": (("dp", 0),),
    },
    reference=_fsdp_reference,
)


# -- (d) vocab-parallel embedding, LM head and cross-entropy ---------------------------

LM_SHAPE = dict(batch=4, seq=5, hidden=8, vocab=12)


def _lm_inputs() -> Tensors:
    gen = torch.Generator().manual_seed(4)
    b, t, h, v = (LM_SHAPE[k] for k in ("batch", "seq", "hidden", "vocab"))
    return {
        "embedding": _randn(gen, v, h),
        "ln_w": 1 + _randn(gen, h, scale=0.1),
        "ln_b": _randn(gen, h, scale=0.1),
        "head": _randn(gen, v, h),
        "ids": torch.randint(0, v, (b, t), generator=gen),
        "targets": torch.randint(0, v, (b, t), generator=gen),
    }


def _run_vocab_parallel(mod: types.ModuleType, full: Tensors, dp_rank: int, tp_rank: int) -> Results:
    lm = mod.build_lm(full, dp_rank, tp_rank, TP)
    ids = full["ids"].chunk(DP)[dp_rank].clone()
    targets = full["targets"].chunk(DP)[dp_rank].clone()
    logits, loss = mod.train_step(lm, ids, targets, full["targets"].numel())
    return {"logits": logits, "loss": loss, **_grads(lm)}


def _lm_reference(full: Tensors) -> Tensors:
    got = refs.language_model_ends(full)
    return {"logits": got["logits"], "loss": got["loss"], "grad.embed.weight": got["grad.embedding"],
            "grad.ln_w": got["grad.ln_w"], "grad.ln_b": got["grad.ln_b"], "grad.head": got["grad.head"]}


VOCAB_PARALLEL = Driver(
    file="vocab_parallel.py",
    inputs=_lm_inputs,
    run=_run_vocab_parallel,
    layouts={
        "logits": (("dp", 0), ("tp", 2)),
        "loss": FULL,
        "grad.embed.weight": (("tp", 0),),
        "grad.ln_w": FULL,
        "grad.ln_b": FULL,
        "grad.head": (("tp", 0),),
    },
    reference=_lm_reference,
)


# -- (e) mixture of experts, expert parallel over dp -------------------------------------

MOE_SHAPE = dict(tokens=12, hidden=8, ffn=6, experts=4)
MOE_TOP_K = 2
MOE_AUX_COEF = 0.5


def _moe_inputs() -> Tensors:
    gen = torch.Generator().manual_seed(5)
    n, h, f, e = (MOE_SHAPE[k] for k in ("tokens", "hidden", "ffn", "experts"))
    return {
        "w_proj": _randn(gen, h, h, scale=0.5),
        "w_router": _randn(gen, e, h),
        "w1": _randn(gen, e, f, h, scale=0.5),
        "w2": _randn(gen, e, h, f, scale=0.5),
        "ctx": _randn(gen, n, h),
        "target": _randn(gen, n, h),
    }


def _run_moe(mod: types.ModuleType, full: Tensors, dp_rank: int, tp_rank: int) -> Results:
    moe = mod.build_moe(full, dp_rank, tp_rank, DP, TP, MOE_TOP_K)
    ctx = cut(full["ctx"], (("dp", 0), ("tp", 1)), dp_rank, tp_rank).clone()
    target = full["target"].chunk(DP)[dp_rank].clone()
    out, loss = mod.train_step(moe, ctx, target, full["target"].numel(), MOE_AUX_COEF)
    return {"out": out, "loss": loss, **_grads(moe)}


def _moe_reference(full: Tensors) -> Tensors:
    got = refs.mixture_of_experts(full, MOE_TOP_K, MOE_AUX_COEF, DP)
    return {"out": got["out"], "loss": got["loss"],
            **{k: got[k] for k in ("grad.w_proj", "grad.w_router", "grad.w1", "grad.w2")}}


MOE = Driver(
    file="moe_expert_parallel.py",
    inputs=_moe_inputs,
    run=_run_moe,
    layouts={
        "out": (("dp", 0),),
        "loss": FULL,
        "grad.w_proj": (("tp", 1),),
        "grad.w_router": FULL,
        "grad.w1": (("dp", 0),),
        "grad.w2": (("dp", 0),),
    },
    reference=_moe_reference,
)


# -- (f) data-parallel loss normalised by the global token count ------------------------

DP_LOSS_SHAPE = dict(sequences=4, seq=6, hidden=8, vocab=10)


def _dp_loss_inputs() -> Tensors:
    gen = torch.Generator().manual_seed(6)
    b, t, h, v = (DP_LOSS_SHAPE[k] for k in ("sequences", "seq", "hidden", "vocab"))
    # Real lengths differ per sequence, so the dp ranks hold 11 and 5 real tokens.
    lengths = torch.tensor([6, 5, 2, 3])
    return {
        "embedding": _randn(gen, v, h),
        "w_out": _randn(gen, v, h),
        "ids": torch.randint(0, v, (b, t), generator=gen),
        "targets": torch.randint(0, v, (b, t), generator=gen),
        "loss_mask": (torch.arange(t) < lengths[:, None]).to(torch.float64),
    }


def _run_dp_loss(mod: types.ModuleType, full: Tensors, dp_rank: int, tp_rank: int) -> Results:
    model = mod.build_model(full, dp_rank, tp_rank)
    ids, targets, mask = (full[k].chunk(DP)[dp_rank].clone() for k in ("ids", "targets", "loss_mask"))
    logits, loss = mod.train_step(model, ids, targets, mask)
    return {"logits": logits, "loss": loss, **_grads(model)}


DP_LOSS = Driver(
    file="dp_loss.py",
    inputs=_dp_loss_inputs,
    run=_run_dp_loss,
    layouts={"logits": (("dp", 0),), "loss": FULL, "grad.embedding": FULL, "grad.w_out": FULL},
    reference=refs.masked_language_model,
)


# -- (g) per-sequence mean loss on packed tokens, dp = 4: sub-axes of dp -------------------

PACKED_SHAPE = dict(sequences=2, seq=8, hidden=8, vocab=10)
PACKED_MESH = (4, 1)


def _packed_inputs() -> Tensors:
    gen = torch.Generator().manual_seed(7)
    b, t, h, v = (PACKED_SHAPE[k] for k in ("sequences", "seq", "hidden", "vocab"))
    # Sequence 1 has 5 real tokens: its two halves (ranks 2 and 3) hold 4 and 1.
    lengths = torch.tensor([8, 5])
    return {
        "embedding": _randn(gen, v, h),
        "w_out": _randn(gen, v, h),
        "ids": torch.randint(0, v, (b * t,), generator=gen),
        "targets": torch.randint(0, v, (b * t,), generator=gen),
        "loss_mask": (torch.arange(t) < lengths[:, None]).to(torch.float64).flatten(),
    }


def _run_packed(mod: types.ModuleType, full: Tensors, dp_rank: int, tp_rank: int) -> Results:
    model = mod.build_model(full, dp_rank, tp_rank)
    dp = PACKED_MESH[0]
    ids, targets, mask = (full[k].chunk(dp)[dp_rank].clone() for k in ("ids", "targets", "loss_mask"))
    logits, loss = mod.train_step(model, ids, targets, mask)
    return {"logits": logits, "loss": loss, **_grads(model)}


PACKED_TOKENS_LOSS = Driver(
    file="packed_tokens_loss.py",
    inputs=_packed_inputs,
    run=_run_packed,
    layouts={"logits": (("dp", 0),), "loss": FULL, "grad.embedding": FULL, "grad.w_out": FULL},
    reference=lambda full: refs.sequence_mean_language_model(full, PACKED_SHAPE["sequences"]),
    mesh=PACKED_MESH,
)


DRIVERS: Dict[str, Driver] = {
    "tp_block": TP_BLOCK,
    "sp_block": SP_BLOCK,
    "fsdp_tp_mlp": FSDP_TP_MLP,
    "vocab_parallel": VOCAB_PARALLEL,
    "moe_expert_parallel": MOE,
    "dp_loss": DP_LOSS,
    "packed_tokens_loss": PACKED_TOKENS_LOSS,
}
