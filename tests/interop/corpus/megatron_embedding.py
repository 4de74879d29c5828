"""Megatron-style vocab-parallel embedding, expert all-to-all and the
last-dim sequence-parallel helpers (fresh, in megatron-core's style)."""

from __future__ import annotations

from typing import Annotated, List

import torch
from torch import Tensor

from spmd_mypy import I, R, S, Spmd, V
from megatron.core import parallel_state, tensor_parallel
from megatron.core.tensor_parallel import VocabParallelEmbedding


class Embedding(torch.nn.Module):
    def __init__(self, vocab: int, hidden: int, config: object) -> None:
        super().__init__()
        self.word = VocabParallelEmbedding(vocab, hidden, init_method=torch.nn.init.normal_, config=config,
                                           reduce_scatter_embeddings=False)

    def forward(self, ids: Annotated[Tensor, Spmd(tp=R)]) -> Annotated[Tensor, Spmd(tp=I)]:
        return self.word(ids)


def scatter_for_sequence_parallel(x: Annotated[Tensor, Spmd(tp=I)]) -> Annotated[Tensor, Spmd(tp=S(0))]:
    return tensor_parallel.scatter_to_sequence_parallel_region(x)


def split_hidden(x: Annotated[Tensor, Spmd(tp=I)]) -> Annotated[Tensor, Spmd(tp=S(-1))]:
    return tensor_parallel.scatter_to_tensor_model_parallel_region(x)


def gather_last_dim(x: Annotated[Tensor, Spmd(tp=S(-1))]) -> Annotated[Tensor, Spmd(tp=R)]:
    return tensor_parallel.all_gather_last_dim_from_tensor_parallel_region(x)


def dispatch_tokens(
    tokens: Annotated[Tensor, Spmd(tp=V)], send: List[int], recv: List[int]
) -> Annotated[Tensor, Spmd(tp=V)]:
    return tensor_parallel.all_to_all(parallel_state.get_tensor_model_parallel_group(), tokens, recv, send)
