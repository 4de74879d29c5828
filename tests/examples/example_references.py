"""Single-process references for the examples: plain torch on full tensors.

Written from the models' definitions, independently of examples/ (no
spmd_mypy, no sharding): each function takes the full weights and the full
batch and returns the output, the loss and every weight's gradient by name.
Attention is written out (scores, causal mask, softmax) rather than calling
scaled_dot_product_attention as the examples do.
"""

from __future__ import annotations

import math
from typing import Dict, List

import torch
import torch.nn.functional as F
from torch import Tensor

Tensors = Dict[str, Tensor]


def _leaves(full: Tensors, names: List[str]) -> Tensors:
    return {n: full[n].clone().requires_grad_() for n in names}


def _grads(params: Tensors, prefix: str = "grad.") -> Tensors:
    out = {}
    for n, p in params.items():
        assert p.grad is not None, n
        out[prefix + n] = p.grad
    return out


def _attention(x: Tensor, wq: Tensor, wk: Tensor, wv: Tensor, head_dim: int) -> Tensor:
    b, t, _ = x.shape

    def split(w: Tensor) -> Tensor:
        return (x @ w.T).view(b, t, -1, head_dim).transpose(1, 2)

    q, k, v = split(wq), split(wk), split(wv)
    scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim)
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    ctx = torch.softmax(scores, dim=-1) @ v
    return ctx.transpose(1, 2).reshape(b, t, -1)


BLOCK_WEIGHTS = ["ln1_w", "ln1_b", "w_q", "w_k", "w_v", "w_o", "b_o", "ln2_w", "ln2_b", "w_in", "b_in", "w_out", "b_out"]


def transformer_block(full: Tensors, head_dim: int) -> Tensors:
    """Pre-norm block: x + attn(ln1(x)), then + mlp(ln2(.)); loss = mean squared error."""
    p = _leaves(full, BLOCK_WEIGHTS)
    x = full["x"]
    hidden = x.shape[-1]
    h = F.layer_norm(x, (hidden,), p["ln1_w"], p["ln1_b"])
    x = x + _attention(h, p["w_q"], p["w_k"], p["w_v"], head_dim) @ p["w_o"].T + p["b_o"]
    h = F.layer_norm(x, (hidden,), p["ln2_w"], p["ln2_b"])
    h = F.gelu(h @ p["w_in"].T + p["b_in"])
    out = x + h @ p["w_out"].T + p["b_out"]
    loss = ((out - full["target"]) ** 2).mean()
    loss.backward()
    return {"out": out.detach(), "loss": loss.detach(), **_grads(p)}


def mlp(full: Tensors) -> Tensors:
    """gelu(x W_in^T + b_in) W_out^T + b_out; loss = mean squared error."""
    p = _leaves(full, ["w_in", "b_in", "w_out", "b_out"])
    h = F.gelu(full["x"] @ p["w_in"].T + p["b_in"])
    out = h @ p["w_out"].T + p["b_out"]
    loss = ((out - full["target"]) ** 2).mean()
    loss.backward()
    return {"out": out.detach(), "loss": loss.detach(), **_grads(p)}


def language_model_ends(full: Tensors) -> Tensors:
    """Embedding, layer norm, tanh, LM head; loss = mean cross-entropy over all tokens."""
    p = _leaves(full, ["embedding", "ln_w", "ln_b", "head"])
    h = F.embedding(full["ids"], p["embedding"])
    h = torch.tanh(F.layer_norm(h, (h.shape[-1],), p["ln_w"], p["ln_b"]))
    logits = h @ p["head"].T
    loss = F.cross_entropy(logits.flatten(0, 1), full["targets"].flatten())
    loss.backward()
    return {"logits": logits.detach(), "loss": loss.detach(), **_grads(p)}


def mixture_of_experts(full: Tensors, top_k: int, aux_coef: float, shards: int) -> Tensors:
    """h = ctx W_proj^T; out = h + sum over the top-k experts of gate * expert(h).

    Loss: mean squared error over all tokens plus aux_coef times the sum over
    the `shards` contiguous token shards of each one's Switch load-balancing
    loss (num_experts * sum_e fraction_e * mean_prob_e over the shard).
    """
    p = _leaves(full, ["w_proj", "w_router", "w1", "w2"])
    h = full["ctx"] @ p["w_proj"].T
    probs = torch.softmax(h @ p["w_router"].T, dim=-1)
    gates, chosen = torch.topk(probs, top_k, dim=-1)
    gates = gates / gates.sum(dim=-1, keepdim=True)
    num_experts = p["w_router"].shape[0]
    every = torch.stack([F.gelu(h @ p["w1"][e].T) @ p["w2"][e].T for e in range(num_experts)])
    rows = torch.arange(h.shape[0])
    out = h + sum(gates[:, j, None] * every[chosen[:, j], rows] for j in range(top_k))
    loss = ((out - full["target"]) ** 2).mean()
    for c, pr in zip(chosen.chunk(shards), probs.chunk(shards)):
        fraction = torch.bincount(c.flatten(), minlength=num_experts).to(pr.dtype) / c.numel()
        loss = loss + aux_coef * num_experts * (fraction * pr.mean(dim=0)).sum()
    loss.backward()
    return {"out": out.detach(), "loss": loss.detach(), **_grads(p)}


def masked_language_model(full: Tensors) -> Tensors:
    """Embedding, tanh, projection; loss = cross-entropy averaged over the masked-in tokens."""
    p = _leaves(full, ["embedding", "w_out"])
    logits = torch.tanh(F.embedding(full["ids"], p["embedding"])) @ p["w_out"].T
    token_loss = F.cross_entropy(logits.flatten(0, 1), full["targets"].flatten(), reduction="none")
    mask = full["loss_mask"].flatten()
    loss = (token_loss * mask).sum() / mask.sum()
    loss.backward()
    return {"logits": logits.detach(), "loss": loss.detach(), **_grads(p)}


def sequence_mean_language_model(full: Tensors, sequences: int) -> Tensors:
    """The same model on packed tokens [sequences * seq]; loss = the mean over
    sequences of each sequence's cross-entropy averaged over its masked-in tokens."""
    p = _leaves(full, ["embedding", "w_out"])
    logits = torch.tanh(F.embedding(full["ids"], p["embedding"])) @ p["w_out"].T
    token_loss = F.cross_entropy(logits, full["targets"], reduction="none").view(sequences, -1)
    mask = full["loss_mask"].view(sequences, -1)
    loss = ((token_loss * mask).sum(dim=1) / mask.sum(dim=1)).mean()
    loss.backward()
    return {"logits": logits.detach(), "loss": loss.detach(), **_grads(p)}
