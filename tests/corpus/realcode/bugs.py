"""Seeded bugs in the corpus: one-line mutations, each a real TP bug of a known class.

Each Mutation names a corpus file, an exact source line (indentation
included; it occurs exactly once in the file), its replacement, the spmd
error code the checker should report, and the bug class (a row of the shared
notes' bug-classes.md, or the issue's name for it).  The error belongs at the
mutated line unless `flagged` names another line of the mutated file (text
that occurs there exactly once): for bugs whose first wrong value is only
misused later (a gather typed R where I is needed).

bench/bench_realcode.py and tests/corpus/test_realcode.py apply each mutation
alone and check the result.  Pure data: imports nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

FORGOTTEN_REDUCTION = "forgotten all-reduce after a row-parallel matmul"
DOUBLE_REDUCE = "double all-reduce"
WRONG_DST = "wrong destination type of a gather/reduce (R vs I)"
FORGOTTEN_COPY = "forgotten no-op-in-forward helper (copy-to-region)"
PG_COLLECTIVE = "wrong collective over a ProcessGroup"
SP_SWAP = "sequence-parallel gather and reduce-scatter swapped"
NONLINEAR_P = "nonlinear op on a Partial (scores missing a reduction)"
LOSS_NOT_I_P = "backward on a loss that is neither I nor P"
BIAS_ON_PARTIAL = "bias added to a partial sum"
SP_NORM = "sequence-parallel norm grads never summed over TP"


@dataclass(frozen=True)
class Mutation:
    id: str
    file: str  # relative to tests/corpus/realcode
    line: str  # the exact source line replaced (no newline)
    replacement: str
    code: str  # expected error code
    bug_class: str
    flagged: Optional[str] = None  # the reported line's text, when not the mutated one

    def apply(self, source: str) -> str:
        lines = source.split("\n")
        hits = [i for i, text in enumerate(lines) if text == self.line]
        if len(hits) != 1:
            raise ValueError(f"{self.id}: the line occurs {len(hits)} times in {self.file}")
        lines[hits[0]] = self.replacement
        return "\n".join(lines)

    def expected_line(self, source: str) -> int:
        """1-based line of the expected error in the mutated source."""
        mutated = self.apply(source).split("\n")
        target = self.replacement if self.flagged is None else self.flagged
        hits = [i for i, text in enumerate(mutated) if text == target]
        if len(hits) != 1:
            raise ValueError(f"{self.id}: the flagged line occurs {len(hits)} times")
        return hits[0] + 1


MUTATIONS: Tuple[Mutation, ...] = (
    Mutation(
        "sp_row_local_contraction", "megatron_layers.py",
        '    output = spmd.reduce_scatter(partial, "tp", src=P, dst=S(0))',
        "    output = F.linear(input_parallel, weight)",
        "spmd-op", FORGOTTEN_REDUCTION,
    ),
    Mutation(
        "row_reduce_dropped_reinterpret", "megatron_layers.py",
        '    partial = spmd.reinterpret(F.linear(input_parallel, weight), "tp", src=V, dst=P)',
        "    partial = F.linear(input_parallel, weight)",
        "spmd-op", FORGOTTEN_REDUCTION,
    ),
    Mutation(
        "titan_attn_local_matmul", "torchtitan_tp.py",
        '        return spmd.reduce_scatter(partial, "tp", src=P, dst=S(1))',
        "        return out @ self.wo.t()",
        "spmd-op", FORGOTTEN_REDUCTION,
    ),
    Mutation(
        "titan_ffn_return_partial", "torchtitan_tp.py",
        '        return spmd.reduce_scatter(out, "tp", src=P, dst=S(1))',
        "        return out",
        "spmd-return", FORGOTTEN_REDUCTION,
    ),
    Mutation(
        "picotron_double_all_reduce", "picotron_tp.py",
        '        output = spmd.all_reduce(partial, "tp", src=P, dst=I)',
        '        output = spmd.all_reduce(spmd.all_reduce(partial, "tp", src=P, dst=I), "tp", src=P, dst=I)',
        "spmd-collective", DOUBLE_REDUCE,
    ),
    Mutation(
        "picotron_embedding_dst_r", "picotron_tp.py",
        '        return spmd.all_reduce(partial, "tp", src=P, dst=I)',
        '        return spmd.all_reduce(partial, "tp", src=P, dst=R)',
        "spmd-return", WRONG_DST,
    ),
    Mutation(
        "titan_ffn_gather_dst_i", "torchtitan_tp.py",
        '        gathered = spmd.all_gather(x, "tp", src=S(1), dst=R)',
        '        gathered = spmd.all_gather(x, "tp", src=S(1), dst=I)',
        "spmd-op", WRONG_DST,
        flagged="        hidden = F.silu(F.linear(gathered, self.w1)) * F.linear(gathered, self.w3)",
    ),
    Mutation(
        "lm_head_no_copy_to_region", "megatron_vocab.py",
        "    return F.linear(input_parallel, word_embeddings_weight)",
        "    return F.linear(hidden, word_embeddings_weight)",
        "spmd-op", FORGOTTEN_COPY,
    ),
    Mutation(
        "picotron_column_no_copy", "picotron_tp.py",
        "        output = F.linear(input_parallel, self.weight, self.bias if self.use_bias else None)",
        "        output = F.linear(x, self.weight, self.bias if self.use_bias else None)",
        "spmd-op", FORGOTTEN_COPY,
    ),
    Mutation(
        "nanotron_pg_all_reduce_of_v", "nanotron_model.py",
        "    target_logit = spmd.all_reduce(spmd.reinterpret(picked, tp_pg, src=V, dst=P), tp_pg, src=P, dst=I)",
        "    target_logit = spmd.all_reduce(picked, tp_pg, src=P, dst=I)",
        "spmd-collective", PG_COLLECTIVE,
    ),
    Mutation(
        "nanotron_pg_gather_of_partial", "nanotron_tp.py",
        "        reduced = spmd.all_reduce(out, group, src=P, dst=I)",
        "        reduced = spmd.all_gather(out, group, src=S(0), dst=I)",
        "spmd-collective", PG_COLLECTIVE,
    ),
    Mutation(
        "nanotron_embedding_identity_for_sum", "nanotron_tp.py",
        "        return differentiable_all_reduce_sum(spmd.reinterpret(out, self.pg, src=V, dst=P), self.pg)",
        "        return differentiable_identity(spmd.reinterpret(out, self.pg, src=V, dst=P), self.pg)",
        "spmd-arg", PG_COLLECTIVE,
    ),
    Mutation(
        "megatron_embedding_copy_for_reduce", "megatron_vocab.py",
        "        return reduce_from_tensor_model_parallel_region(output_partial, self.tp_group)",
        "        return copy_to_tensor_model_parallel_region(output_partial, self.tp_group)",
        "spmd-arg", PG_COLLECTIVE,
    ),
    Mutation(
        "titan_attn_sp_swapped", "torchtitan_tp.py",
        '        h = spmd.all_gather(x, "tp", src=S(1), dst=R)',
        '        h = spmd.reduce_scatter(x, "tp", src=P, dst=S(1))',
        "spmd-collective", SP_SWAP,
    ),
    Mutation(
        "megatron_sp_swapped", "megatron_layers.py",
        '    total_input = spmd.all_gather(input_, "tp", src=S(0), dst=R)',
        '    total_input = spmd.reduce_scatter(input_, "tp", src=P, dst=S(0))',
        "spmd-collective", SP_SWAP,
    ),
    Mutation(
        "vocab_exp_of_partial", "megatron_vocab.py",
        "    sum_exp_local = torch.exp(logits).sum(dim=-1)",
        '    sum_exp_local = torch.exp(spmd.reinterpret(logits, "tp", src=V, dst=P)).sum(dim=-1)',
        "spmd-op", NONLINEAR_P,
    ),
    Mutation(
        "titan_softmax_of_partial", "torchtitan_tp.py",
        "        out = F.scaled_dot_product_attention(xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2), is_causal=True)",
        '        out = F.scaled_dot_product_attention(spmd.linear(h, self.wq.t(), out_partial_axes="tp").view(xq.shape).transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2), is_causal=True)',
        "spmd-op", NONLINEAR_P,
    ),
    Mutation(
        "megatron_backward_of_v_loss", "megatron_train.py",
        "    loss.backward(torch.ones_like(loss))",
        "    loss.backward()",
        "spmd-backward", LOSS_NOT_I_P,
    ),
    Mutation(
        "titan_loss_local_mean", "torchtitan_tp.py",
        '    return spmd.reinterpret(token_loss.sum() / global_tokens, "dp", src=V, dst=P)',
        "    return token_loss.mean()",
        "spmd-return", LOSS_NOT_I_P,
    ),
    Mutation(
        "row_bias_before_reduce", "megatron_layers.py",
        '    return spmd.all_reduce(partial, "tp", src=P, dst=I) + bias',
        '    return spmd.all_reduce(partial + bias, "tp", src=P, dst=I)',
        "spmd-op", BIAS_ON_PARTIAL,
    ),
    # Flag-dependent layouts (issue 13 item 6): the wrong branch of a flag.
    Mutation(
        "megatron_sp_norm_weight_not_converted", "megatron_transformer.py",
        "            return F.layer_norm(x, (self.hidden_size,), weight, bias, self.eps)",
        "            return F.layer_norm(x, (self.hidden_size,), self.weight, self.bias, self.eps)",
        "spmd-op", SP_NORM,
    ),
    Mutation(
        "nanotron_rs_mode_norm_weight_not_converted", "nanotron_model.py",
        '            return normed * spmd.convert(self.weight, "tp", src=I, dst=R)',
        "            return normed * self.weight",
        "spmd-op", SP_NORM,
    ),
    Mutation(
        "megatron_sp_row_bias_not_converted", "megatron_layers.py",
        '            return output_ + spmd.convert(self.bias, "tp", src=I, dst=R), None',
        "            return output_ + self.bias, None",
        "spmd-op", SP_NORM,
    ),
    Mutation(
        "megatron_sp_skipped_bias_not_converted", "megatron_transformer.py",
        '        return output + spmd.convert(bias, "tp", src=I, dst=R)',
        "        return output + bias",
        "spmd-op", SP_NORM,
    ),
    Mutation(
        "titan_rmsnorm_weight_not_converted", "torchtitan_tp.py",
        '        return normed * spmd.convert(self.weight, "tp", src=I, dst=R)',
        "        return normed * self.weight",
        "spmd-op", SP_NORM,
    ),
)
