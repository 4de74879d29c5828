"""Each example trains on 4 gloo ranks (dp=2 x tp=2) to the single-process result.

(packed_tokens_loss runs on the same 4 ranks as dp=4.)  For every example: the output, the loss and every parameter's gradient on
every rank equal the reference computed on one process from the full
tensors (example_references.py), cut to the rank's piece (example_drivers.py
layouts), to 1e-6 in float64.
"""

from __future__ import annotations

import pytest
import torch

import example_drivers
from examples_gloo import WORLD, per_rank_tensors
from gloo_harness import GlooRun

pytestmark = pytest.mark.gloo

TOL = 1e-6


def test_workers_ran_and_exited(examples_gloo_run: GlooRun) -> None:
    examples_gloo_run.check()
    assert examples_gloo_run.setup_info == {r: [[0, 1], [2, 3]] for r in range(WORLD)}
    assert examples_gloo_run.exitcodes == [0] * WORLD, examples_gloo_run.exitcodes


@pytest.mark.parametrize("name", sorted(example_drivers.DRIVERS))
def test_example_matches_single_process(examples_gloo_run: GlooRun, name: str) -> None:
    driver = example_drivers.DRIVERS[name]
    per_rank = per_rank_tensors(examples_gloo_run, name)
    ref = driver.reference(driver.inputs())
    assert set(ref) == set(driver.layouts), "the reference and the layouts name the same results"
    for r in range(WORLD):
        local = per_rank[r]
        assert set(local) == set(driver.layouts), f"rank {r} returned {sorted(local)}"
        for key in driver.layouts:
            got = local[key]
            assert got is not None, f"{name}: {key} is None on rank {r}"
            want = driver.piece(ref[key], key, r)
            assert got.dtype == torch.float64, f"{name}: {key} is {got.dtype}"
            torch.testing.assert_close(
                got, want, rtol=TOL, atol=TOL, msg=lambda m: f"{name}: {key} on rank {r}: {m}"
            )
