"""One gloo run for every example and every seeded-bug variant (see examples_gloo.py)."""

from __future__ import annotations

import pytest

from examples_gloo import GlooRun, Job, run_all


def all_jobs() -> list[Job]:
    import example_drivers
    import seeded_bugs

    jobs = [Job(id=name, example=name) for name in example_drivers.DRIVERS]
    jobs += [Job(id=f"seeded_{s.id}", example=s.example, source=s.buggy_source()) for s in seeded_bugs.SEEDS]
    return jobs


@pytest.fixture(scope="session")
def examples_gloo_run() -> GlooRun:
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    return run_all(all_jobs())
