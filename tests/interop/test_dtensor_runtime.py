"""DTensor interop at run time: the placements <-> SPMD type rule (vocab/placements.py)
and its torch side (runtime/dtensor.py); the wrong gradient placement of
pytorch issue 172932's class computes a wrong gradient on simulated ranks,
the fixed one (and the typed helper) the one-process gradient."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.distributed.tensor import Partial, Replicate, Shard

from spmd_mypy import I, P, PartitionSpec, R, S, Spmd, V
from spmd_mypy.runtime import dtensor
from spmd_mypy.vocab.placements import (
    Placement,
    PlacementError,
    default_grad,
    from_placements,
    local_type,
    placements_of,
    to_placements,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
REP, PART = Placement("Replicate"), Placement("Partial")

# (forward, gradient) -> local type, written out from the DTensor semantics
# (the local gradient's layout as autograd hands it back), independent of the table.
PAIRS = [
    (REP, REP, I),
    (REP, PART, R),
    (Placement.shard(1), Placement.shard(1), S(1)),
    (PART, REP, P),
]


@pytest.mark.parametrize("forward,grad,want", PAIRS)
def test_pairs_and_back(forward: Placement, grad: Placement, want: object) -> None:
    assert local_type(forward, grad) == want
    assert placements_of(want) == (forward, grad)  # type: ignore[arg-type]


@pytest.mark.parametrize("forward,grad", [(PART, PART), (Placement.shard(0), REP), (REP, Placement.shard(0)),
                                          (Placement.shard(0), Placement.shard(1))])
def test_pairs_without_a_type(forward: Placement, grad: Placement) -> None:
    with pytest.raises(PlacementError, match="no SPMD type"):
        local_type(forward, grad)


def test_defaults_follow_torch() -> None:
    # torch 2.13's _normalize_placements_for_grad: Partial -> Replicate, the rest kept
    assert [default_grad(p) for p in (REP, PART, Placement.shard(2))] == [REP, REP, Placement.shard(2)]
    assert from_placements([REP, Placement.shard(0)], None, ["tp", "dp"]) == Spmd(tp=I, dp=S(0))


def test_spec_form_and_mesh_order() -> None:
    forward, grad = to_placements(Spmd(spec=PartitionSpec(("dp", "tp"), None)), ["dp", "tp"])
    assert forward == grad == [Placement.shard(0), Placement.shard(0)]
    with pytest.raises(PlacementError, match="not in the mesh's order"):
        to_placements(Spmd(spec=PartitionSpec(("tp", "dp"), None)), ["dp", "tp"])
    with pytest.raises(PlacementError, match="axis 'tp': V"):
        to_placements(Spmd(dp=R, tp=V), ["dp", "tp"])


def test_torch_objects_round_trip() -> None:
    for p in (Replicate(), Partial(), Shard(1)):
        assert dtensor.to_torch(dtensor.from_torch(p)) == p
    assert dtensor.from_torch(Shard(-1), ndim=3) == Placement.shard(2)
    with pytest.raises(PlacementError, match="non-sum"):
        dtensor.from_torch(Partial("max"))


def test_wrong_gradient_placement_computes_a_wrong_gradient() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "stubs" / "torch-spmd"), str(ROOT)]))
    got = subprocess.run([sys.executable, str(HERE / "dtensor_grad_program.py")], capture_output=True, text=True,
                         env=env, timeout=600)
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout.splitlines()[-1])
    reference = torch.tensor(out["reference"])
    for how in ("partial", "typed"):  # grad_placements=[Partial()], dtensor.to_local(dt, Spmd(tp=R))
        for rank_grad in out[how]:
            assert torch.allclose(torch.tensor(rank_grad), reference), how
    wrong = [not torch.allclose(torch.tensor(g), reference) for g in out["default"]]
    assert all(wrong), "the default Replicate() gradient placement should drop the other ranks' addends"
    assert torch.allclose(sum(torch.tensor(g) for g in out["default"]), reference)  # each holds only its addend
