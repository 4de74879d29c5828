"""torch.compile(fullgraph=True) of typed collectives on 4 gloo ranks, and max/min reductions.

One spawn (tests/gloo_harness.py).  Each worker runs:

  mlp.*        a tensor-parallel MLP step (Megatron TP, and sequence parallel
               with all_gather / reduce_scatter) compiled with fullgraph=True
               and the inductor backend, eager, and compared with each other
               and with a single-process reference on the full weights;
  compiled.*   a selection of the case table (every primitive row, the
               composites, uneven and random splits, several axes, process
               groups) compiled with fullgraph=True (aot_eager: forward and
               backward graphs through AOTAutograd), against the reference;
  reduce.*     all_reduce(op="max"/"min") eager and compiled, against the
               elementwise max/min of the group's inputs.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Tuple

import pytest
import torch

import cases
from gloo_harness import GlooRun, gloo_available, plain, spawn_and_collect, tensor_of

pytestmark = pytest.mark.gloo

WORLD = cases.WORLD
B, H, F = 8, 6, 8  # tokens, hidden, ffn (F and B divisible by the tp size)


@dataclass(frozen=True)
class Item:
    id: str
    kind: str  # "mlp", "compiled", "reduce"
    arg: Any


_ALSO = (
    "uneven.all_gather.S1.I.1d.w", "uneven.reduce_scatter.P.S-1.1d.w",
    "uneven.all_to_all.S-1.S0.both.1d.w", "uneven.all_to_all.S1.S1.resplit.1d.w",
    "uneven.convert.S1.P.1d.w", "a2a.V.V.uneven_per_rank.1d.w",
    "multi.all_reduce.P.R.0", "multi.all_gather.S(1).R.6", "multi.reduce_scatter.P.S(0).9",
    "group.all_gather.S(0).R.0.2d.tp", "group.reduce_scatter.P.S(0).2.2d.tp",
    "redist.P.S(1).6.1d.w", "redist.S(0).S(1).8.1d.w", "redist.I.S(0).12.1d.w",
)


def _compiled_selection() -> List[cases.Case]:
    """Every primitive row and composite on one axis, the random splits, and a few more forms."""
    def keep(c: cases.Case) -> bool:
        if "primitive" in c.tags or "composite" in c.tags:
            return (c.mesh, c.axis) == ("2d", "tp")
        return c.id.startswith("random") or c.id in _ALSO

    chosen = [c for c in cases.VALID if keep(c)]
    missing = set(_ALSO) - {c.id for c in chosen}
    assert not missing, missing
    return chosen


def _items() -> List[Item]:
    out = [Item(f"mlp.{style}", "mlp", style) for style in ("tp", "sp")]
    out += [Item(f"compiled.{c.id}", "compiled", c.id) for c in _compiled_selection()]
    for op in ("max", "min"):
        for axis in ("w", "tp", ("dp", "tp")):
            for how in ("eager", "compiled"):
                out.append(Item(f"reduce.{op}.{axis}.{how}", "reduce", (op, axis, how)))
    out.append(Item("reduce.max.requires_grad", "reduce", ("max", "w", "grad")))
    return out


# -- the MLP and its reference --------------------------------------------------------


def _full(tag: str, *shape: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(zlib.crc32(tag.encode()))
    return torch.randn(shape, generator=gen, dtype=torch.float64)


def _mlp_step(style: str, x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """One rank's forward to a local loss; w1 column-parallel, w2 row-parallel over "tp"."""
    import spmd_mypy as spmd
    from spmd_mypy import I, P, R, S

    if style == "tp":  # x: I; f = reinterpret(I -> R), g = all_reduce(P -> I)
        xr = spmd.reinterpret(x, "tp", src=I, dst=R)
        y = spmd.all_reduce(torch.relu(xr @ w1) @ w2, "tp", src=P, dst=I)
    else:  # sequence parallel, x: S(0); all_gather in, reduce_scatter out
        xr = spmd.all_gather(x, "tp", src=S(0), dst=R)
        y = spmd.reduce_scatter(torch.relu(xr @ w1) @ w2, "tp", src=P, dst=S(0))
    return (y * y).sum()


def _reference(style: str) -> Dict[str, torch.Tensor]:
    """The full model on one process: loss and gradients of x, w1, w2."""
    x = _full("mlp.x", B, H).requires_grad_()
    w1 = _full("mlp.w1", H, F).requires_grad_()
    w2 = _full("mlp.w2", F, H).requires_grad_()
    loss = ((torch.relu(x @ w1) @ w2) ** 2).sum()
    loss.backward()
    assert x.grad is not None and w1.grad is not None and w2.grad is not None
    return {"loss": loss.detach(), "x": x.grad, "w1": w1.grad, "w2": w2.grad}


def _shards(style: str, c: int, n: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    f = F // n
    x = _full("mlp.x", B, H)
    if style == "sp":
        x = x[c * (B // n):(c + 1) * (B // n)]
    return (x, _full("mlp.w1", H, F)[:, c * f:(c + 1) * f],
            _full("mlp.w2", F, H)[c * f:(c + 1) * f])


def _run_mlp(style: str, rank: int, meshes: Dict[str, Any]) -> Any:
    import spmd_mypy as spmd

    mesh = meshes["2d"]
    c = mesh.get_local_rank("tp")
    results = {}
    for how in ("eager", "compiled"):
        leaves = [t.clone().requires_grad_() for t in _shards(style, c, mesh.size(1))]
        fn: Callable[..., torch.Tensor] = lambda *a: _mlp_step(style, *a)  # noqa: E731
        if how == "compiled":
            torch._dynamo.reset()
            fn = torch.compile(fn, fullgraph=True, backend="inductor")
        with spmd.set_mesh(mesh):
            loss = fn(*leaves)
            loss.backward()
        results[how] = [plain(loss)] + [plain(t.grad) for t in leaves]
    return (c, results)


# -- compiled cases and reductions ---------------------------------------------------


def _run_compiled(case_id: str, rank: int, meshes: Dict[str, Any]) -> Any:
    import spmd_mypy as spmd

    case = cases.BY_ID[case_id]
    exp = cases.expected(case)
    x = exp.inputs[rank].clone().requires_grad_()
    kw = cases.api_kwargs(case, rank)
    axis = cases.axis_arg(case, meshes)
    if isinstance(case.axis, tuple):  # a tuple's flattened group is made outside the trace
        from spmd_mypy.runtime.mesh import prepare_axes

        prepare_axes(meshes[case.mesh], case.axis)
    torch._dynamo.reset()
    fn = torch.compile(lambda t: cases.call(case, t, axis, kw), fullgraph=True, backend="aot_eager")
    with spmd.set_mesh(meshes[case.mesh]):
        y = fn(x)
        y.backward(exp.grads[rank].clone())
    assert x.grad is not None
    return (plain(y), plain(x.grad))


def _reduce_input(rank: int) -> torch.Tensor:
    return _full(f"reduce|{rank}", 3, 4)


def _run_reduce(arg: Tuple[str, Any, str], rank: int, meshes: Dict[str, Any]) -> Any:
    import spmd_mypy as spmd
    from spmd_mypy import P, R

    op, axis, how = arg
    mesh = meshes["1d" if axis == "w" else "2d"]
    x = _reduce_input(rank)
    if how == "grad":
        try:
            with spmd.set_mesh(mesh):
                spmd.all_reduce(x.requires_grad_(), axis, src=P, dst=R, op=op)
        except spmd.CollectiveError as e:
            return ("raised", str(e))
        return ("returned",)
    fn = lambda t: spmd.all_reduce(t, axis, src=P, dst=R, op=op)  # noqa: E731
    if how == "compiled":
        if isinstance(axis, tuple):
            from spmd_mypy.runtime.mesh import prepare_axes

            prepare_axes(mesh, axis)
        torch._dynamo.reset()
        fn = torch.compile(fn, fullgraph=True, backend="aot_eager")
    with spmd.set_mesh(mesh):
        return ("ok", plain(fn(x)))


def _setup(rank: int) -> Tuple[Dict[str, Any], Any]:
    from torch.distributed.device_mesh import init_device_mesh

    meshes = {
        name: init_device_mesh("cpu", shape, mesh_dim_names=dims)
        for name, (shape, dims) in cases.MESH_SHAPES.items()
    }
    return meshes, meshes["2d"].mesh.tolist()


def _run_item(item: Item, rank: int, meshes: Dict[str, Any]) -> Any:
    runner = {"mlp": _run_mlp, "compiled": _run_compiled, "reduce": _run_reduce}[item.kind]
    return runner(item.arg, rank, meshes)


@pytest.fixture(scope="module")
def run() -> GlooRun:
    if not gloo_available():
        pytest.skip("this torch has no gloo backend")
    return spawn_and_collect(_setup, _run_item, _items, world=WORLD, deadline_s=600.0,
                             timeout_s=300.0)


def test_workers_ran(run: GlooRun) -> None:
    run.check()
    assert run.setup_info == {r: [[0, 1], [2, 3]] for r in range(WORLD)}
    assert run.exitcodes == [0] * WORLD, run.exitcodes


def test_selection_covers_every_primitive_row() -> None:
    from spmd_mypy.vocab.collectives import primitive_keys
    from spmd_mypy.vocab.localtype import kind

    chosen = _compiled_selection()
    rows = {(c.op, kind(c.src), kind(c.dst)) for c in chosen if "primitive" in c.tags}
    assert rows == set(primitive_keys())
    assert {c.op for c in chosen if "random" in c.tags} == {"all_gather", "reduce_scatter", "all_to_all"}


@pytest.mark.parametrize("style", ["tp", "sp"])
def test_compiled_mlp_step(run: GlooRun, style: str) -> None:
    ref = _reference(style)
    n = 2
    f = F // n
    for rank, (c, got) in sorted(run.per_rank(f"mlp.{style}").items()):
        eager = [tensor_of(p) for p in got["eager"]]
        comp = [tensor_of(p) for p in got["compiled"]]
        for what, e, k in zip(("loss", "x", "w1", "w2"), eager, comp):
            assert e is not None and k is not None
            torch.testing.assert_close(k, e, rtol=1e-12, atol=1e-12,
                                       msg=lambda m: f"rank {rank} {what}: compiled vs eager: {m}")
        want_x = ref["x"] if style == "tp" else ref["x"][c * (B // n):(c + 1) * (B // n)]
        want = [want_x, ref["w1"][:, c * f:(c + 1) * f], ref["w2"][c * f:(c + 1) * f]]
        for what, k, w in zip(("x", "w1", "w2"), comp[1:], want):
            torch.testing.assert_close(k, w, rtol=1e-10, atol=1e-10,
                                       msg=lambda m: f"rank {rank} grad {what} vs reference: {m}")
        if style == "tp":  # every rank's loss is the whole loss (I)
            torch.testing.assert_close(comp[0], ref["loss"], rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("case", _compiled_selection(), ids=lambda c: c.id)
def test_compiled_case(run: GlooRun, case: cases.Case) -> None:
    exp = cases.expected(case)
    for r, (y, gx) in sorted(run.per_rank(f"compiled.{case.id}").items()):
        for what, got, want in (("forward", y, exp.outputs[r]), ("backward", gx, exp.input_grads[r])):
            t = tensor_of(got)
            assert t is not None and tuple(t.shape) == tuple(want.shape), (what, r)
            torch.testing.assert_close(t, want, rtol=0, atol=0,
                                       msg=lambda m: f"{case.id} {what} on rank {r}: {m}")


def _group_of(axis: Any, rank: int) -> List[int]:
    if axis == "w" or axis == ("dp", "tp"):
        return list(range(WORLD))
    return [r for r in range(WORLD) if r // 2 == rank // 2]  # "tp" on the 2 x 2 mesh


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("axis", ["w", "tp", ("dp", "tp")], ids=str)
@pytest.mark.parametrize("how", ["eager", "compiled"])
def test_reduce_max_min(run: GlooRun, op: str, axis: Any, how: str) -> None:
    for r, got in sorted(run.per_rank(f"reduce.{op}.{axis}.{how}").items()):
        assert got[0] == "ok", got
        xs = torch.stack([_reduce_input(k) for k in _group_of(axis, r)])
        want = xs.amax(0) if op == "max" else xs.amin(0)
        torch.testing.assert_close(tensor_of(got[1]), want, rtol=0, atol=0)


def test_reduce_max_rejects_a_tensor_with_grad(run: GlooRun) -> None:
    for r, got in sorted(run.per_rank("reduce.max.requires_grad").items()):
        assert got[0] == "raised", got
        assert "requires grad" in got[1] and "op='max'" in got[1], got[1]
