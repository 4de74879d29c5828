"""Seeded bugs: a few changed lines of an example, one per catchable bug class.

Each seed names an example (a driver of example_drivers.py), the edits that
turn its source into the buggy variant (each `old` text occurs exactly once),
the line the checker must flag (`flagged`: text that occurs exactly once in
the buggy source) with its error code, and the results that must then differ
from the single-process reference.  The unedited example is the fixed form.

test_seeded_bugs_gloo.py runs every variant on the 4 gloo ranks (the shared
run of conftest.py); test_seeded_bugs_static.py runs mypy once over all of
them.  The bug classes are the rows of the shared notes' bug-classes.md; the
compact forms of the same bugs are in tests/fixtures/test_seeded_bugs.yml.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from examples_gloo import EXAMPLES

import example_drivers


@dataclass(frozen=True)
class Seed:
    id: str
    example: str  # driver name
    bug_class: str
    edits: Tuple[Tuple[str, str], ...]  # (old, new) pairs applied in order
    flagged: str  # text of the line the checker must report
    code: str  # its error code
    differs: Tuple[str, ...]  # results that must differ from the reference

    def original_source(self) -> str:
        return (EXAMPLES / example_drivers.DRIVERS[self.example].file).read_text()

    def buggy_source(self) -> str:
        text = self.original_source()
        for old, new in self.edits:
            count = text.count(old)
            assert count == 1, f"seed {self.id}: {old!r} occurs {count} times in {self.example}"
            text = text.replace(old, new)
        return text

    def flagged_line(self) -> int:
        """1-based line of `flagged` in the buggy source."""
        text = self.buggy_source()
        count = text.count(self.flagged)
        assert count == 1, f"seed {self.id}: flagged text occurs {count} times"
        return text[: text.index(self.flagged)].count("\n") + 1


_PACKED_COUNT = '    num_tokens = spmd.all_reduce(my_tokens, "dp:(2)2", src=P, dst=I)\n'
_FSDP_GATHER_W_IN = '        w_in = spmd.all_gather(self.w_in, "dp", src=S(0), dst=R)\n'

SEEDS = [
    Seed(
        id="copy_to_region_forgotten",
        example="tp_block",
        bug_class="forgotten no-op-in-forward helper",
        edits=(
            (
                '        h = spmd.convert(x, "tp", src=I, dst=R)  # copy-to-region\n\n        def heads',
                "        h = x\n\n        def heads",
            ),
        ),
        flagged="return F.linear(h, w).view(batch, seq, -1, self.head_dim)",
        code="spmd-op",
        # The forward is unchanged; the input gradient of attention is no longer summed over tp.
        differs=("grad.ln1_w", "grad.ln1_b"),
    ),
    Seed(
        id="sequence_parallel_norm_grads_not_summed",
        example="sp_block",
        bug_class="sequence-parallel norm/bias grads never summed over TP",
        edits=(
            (
                '    w = spmd.convert(weight, "tp", src=I, dst=R)\n'
                '    b = spmd.convert(bias, "tp", src=I, dst=R)\n'
                "    return F.layer_norm(x, (x.shape[-1],), w, b)\n",
                "    return F.layer_norm(x, (x.shape[-1],), weight, bias)\n",
            ),
        ),
        flagged="return F.layer_norm(x, (x.shape[-1],), weight, bias)",
        code="spmd-op",
        differs=("grad.ln1_w", "grad.ln1_b", "grad.ln2_w", "grad.ln2_b"),
    ),
    Seed(
        id="bias_added_to_partial_sum",
        example="tp_block",
        bug_class="bias added to a partial sum",
        edits=(
            (
                '        out = spmd.reinterpret(F.linear(h, self.w_out), "tp", src=V, dst=P)\n'
                '        out = spmd.all_reduce(out, "tp", src=P, dst=I)  # reduce-from-region\n'
                "        return out + self.b_out\n",
                '        out = spmd.reinterpret(F.linear(h, self.w_out), "tp", src=V, dst=P)\n'
                "        out = out + self.b_out\n"
                '        return spmd.all_reduce(out, "tp", src=P, dst=I)\n',
            ),
        ),
        flagged="out = out + self.b_out",
        code="spmd-op",
        differs=("out", "loss", "grad.mlp.b_out"),
    ),
    Seed(
        id="aux_loss_on_replicated_values",
        example="moe_expert_parallel",
        bug_class="auxiliary/extra loss computed on replicated values",
        edits=(
            (
                "    loss = mse + aux_coef * aux  # R on tp: every tp rank computed the same loss\n"
                '    loss = spmd.convert(loss, "tp", src=R, dst=P)  # count it once over tp\n',
                '    loss = spmd.convert(mse, "tp", src=R, dst=P)  # count it once over tp\n'
                "    loss = loss + aux_coef * aux\n",
            ),
        ),
        flagged="loss = loss + aux_coef * aux",
        code="spmd-op",
        # Every tp rank adds the auxiliary loss: it is counted tp times.
        differs=("loss", "grad.w_router"),
    ),
    Seed(
        id="loss_normalised_by_local_token_count",
        example="dp_loss",
        bug_class="loss normalised by the local token count",
        edits=(("    return loss_sum / num_tokens\n", "    return loss_sum / local_tokens\n"),),
        flagged="return loss_sum / local_tokens",
        code="spmd-op",
        differs=("loss", "grad.embedding", "grad.w_out"),
    ),
    Seed(
        id="wrong_destination_of_gather",
        example="fsdp_tp_mlp",
        bug_class="wrong destination type of a gather",
        edits=((_FSDP_GATHER_W_IN, _FSDP_GATHER_W_IN.replace("dst=R", "dst=I")),),
        flagged="h = F.gelu(F.linear(h, w_in, b_in))",
        code="spmd-op",
        # The backward of the I gather only splits: the other dp rank's part is lost.
        differs=("grad.w_in",),
    ),
    Seed(
        id="custom_autograd_function_wrong_backward",
        example="fsdp_tp_mlp",
        bug_class="custom autograd Function with a wrong backward",
        edits=(
            ("from typing import Annotated, Dict, Tuple\n", "from typing import Annotated, Any, Dict, Tuple\n\nimport torch\n"),
            (
                "class FullyShardedParallelMLP(nn.Module):\n",
                "class GatherShards(torch.autograd.Function):\n"
                "    @staticmethod\n"
                "    def forward(ctx: Any, shard: Annotated[Tensor, Spmd(dp=S(0), tp=S(0))], dp_rank: int, dp: int)"
                " -> Annotated[Tensor, Spmd(dp=R, tp=S(0))]:\n"
                "        ctx.dp_rank, ctx.dp = dp_rank, dp\n"
                '        return spmd.all_gather(shard, "dp", src=S(0), dst=R)\n'
                "\n"
                "    @staticmethod\n"
                "    def backward(ctx: Any, grad: Annotated[Tensor, Spmd(dp=P, tp=S(0))])"
                " -> Tuple[Annotated[Tensor, Spmd(dp=S(0), tp=S(0))], None, None]:\n"
                "        dp_rank: int = ctx.dp_rank\n"
                "        return grad.chunk(ctx.dp)[dp_rank], None, None  # this rank's slice, never summed\n"
                "\n\n"
                "class FullyShardedParallelMLP(nn.Module):\n",
            ),
            (_FSDP_GATHER_W_IN, "        w_in = GatherShards.apply(self.w_in, self.dp_rank, self.dp)\n"),
        ),
        flagged="return grad.chunk(ctx.dp)[dp_rank], None, None",
        code="spmd-return",
        differs=("grad.w_in",),
    ),
    Seed(
        id="raw_collective_in_differentiable_path",
        example="fsdp_tp_mlp",
        bug_class="raw torch.distributed collective inside a differentiable path",
        edits=(
            ("import torch.nn.functional as F\n", "import torch\nimport torch.distributed as dist\nimport torch.nn.functional as F\n"),
            (
                _FSDP_GATHER_W_IN,
                "        mesh = spmd.current_mesh()\n"
                "        assert mesh is not None\n"
                "        w_in = torch.empty(self.w_in.shape[0] * self.dp, self.w_in.shape[1], dtype=self.w_in.dtype)\n"
                "        with torch.no_grad():\n"
                '            dist.all_gather_into_tensor(w_in, self.w_in, group=mesh.get_group("dp"))\n',
            ),
        ),
        flagged="dist.all_gather_into_tensor(w_in, self.w_in",
        code="spmd-collective",
        # The gathered copy is outside autograd: w_in gets no gradient at all.
        differs=("grad.w_in",),
    ),
    Seed(
        id="router_scores_missing_reduction",
        example="moe_expert_parallel",
        bug_class="router / gate scores missing a reduction at a MoE-TP boundary",
        edits=(("        logits = F.linear(h, self.w_router)\n", "        logits = F.linear(partial, self.w_router)\n"),),
        flagged="probs = torch.softmax(logits, dim=-1)",
        code="spmd-op",
        differs=("out", "loss", "grad.w_router"),
    ),
    Seed(
        id="double_all_reduce",
        example="dp_loss",
        bug_class="double all-reduce",
        edits=(
            (
                '    num_tokens = spmd.all_reduce(spmd.reinterpret(local_tokens, "dp", src=V, dst=P), "dp", src=P, dst=R)\n',
                '    num_tokens = spmd.all_reduce(spmd.reinterpret(local_tokens, "dp", src=V, dst=P), "dp", src=P, dst=R)\n'
                '    num_tokens = spmd.all_reduce(num_tokens, "dp", src=P, dst=R)\n',
            ),
        ),
        flagged='num_tokens = spmd.all_reduce(num_tokens, "dp", src=P, dst=R)',
        code="spmd-collective",
        differs=("loss", "grad.embedding", "grad.w_out"),
    ),
    Seed(
        id="inplace_reduce_overwrites_local_counts",
        example="moe_expert_parallel",
        bug_class="in-place all-reduce overwriting a local buffer still used as local",
        edits=(
            (
                '        self.tokens_per_expert = spmd.all_reduce(spmd.reinterpret(counts, "dp", src=V, dst=P), "dp", src=P, dst=R)\n',
                '        counts.copy_(spmd.all_reduce(spmd.reinterpret(counts, "dp", src=V, dst=P), "dp", src=P, dst=R))\n'
                "        self.tokens_per_expert = counts\n",
            ),
        ),
        flagged="counts.copy_(spmd.all_reduce(",
        code="spmd-inplace",
        # The load-balancing loss now reads global counts as this rank's.
        differs=("loss", "grad.w_router"),
    ),
    Seed(
        id="token_count_reduced_over_whole_axis",
        example="packed_tokens_loss",
        bug_class="reduction over a whole axis where a sub-axis is meant (packed tokens, per-sequence count)",
        edits=((_PACKED_COUNT, _PACKED_COUNT.replace('"dp:(2)2"', '"dp"')),),
        flagged='num_tokens = spmd.all_reduce(my_tokens, "dp", src=P, dst=I)',
        code="spmd-global",
        # Every sequence is divided by the token count of the whole batch (13,
        # not 8 and 5): a token-weighted mean, not the per-sequence one.
        differs=("loss", "grad.embedding", "grad.w_out"),
    ),
    Seed(
        id="sequence_mean_over_local_token_count",
        example="packed_tokens_loss",
        bug_class="loss normalised by the local token count (a sub-axis reduction forgotten)",
        edits=(
            (
                '    num_tokens = spmd.all_reduce(my_tokens, "dp:(2)2", src=P, dst=I)\n'
                "    sequence_loss = loss_sum / num_tokens",
                "    sequence_loss = loss_sum / my_tokens",
            ),
        ),
        flagged="sequence_loss = loss_sum / my_tokens",
        code="spmd-global",
        # Each half of a sequence divides by its own count: the halves of
        # sequence 1 (4 and 1 real tokens) are weighed wrongly.
        differs=("loss", "grad.embedding", "grad.w_out"),
    ),
    Seed(
        id="experts_on_unaligned_tokens",
        example="moe_expert_parallel",
        bug_class="MoE dispatch skipped: experts applied to the unaligned token copies (partitioned shards)",
        edits=(
            (
                '        grouped, grouped_splits = spmd.partitioned.unaligned_to_aligned(dispatched, "dp", splits)\n'
                '        expert_out = spmd.partitioned.map_partitions(self.expert, grouped, "dp", grouped_splits)\n'
                '        returned, _ = spmd.partitioned.aligned_to_unaligned(expert_out, "dp", grouped_splits)\n',
                '        returned = spmd.partitioned.map_partitions(self.expert, dispatched, "dp", splits)\n',
            ),
        ),
        flagged='returned = spmd.partitioned.map_partitions(self.expert, dispatched, "dp", splits)',
        code="spmd-collective",
        # Same shapes, no exchange: each rank's local experts see its own copies of
        # every expert's tokens (experts 0-1's copies through its first expert, ...).
        differs=("out", "loss", "grad.w_proj", "grad.w1", "grad.w2"),
    ),
]

assert len({s.id for s in SEEDS}) == len(SEEDS)
