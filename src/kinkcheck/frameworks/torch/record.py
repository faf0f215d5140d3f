"""PyTorch's registry record: standard library only (:func:`kinkcheck.registry.read_record`)."""

from __future__ import annotations

from kinkcheck.registry import Framework, version_tuple


def requirements(version: str) -> list[str]:
    # setuptools: inductor imports it at compile time (torch <= 2.10); uv's virtualenvs have none. torch 2.1
    # imports pkg_resources, which recent setuptools no longer ships: an older setuptools for old torch.
    reqs = [f"torch=={version}", "setuptools" if version_tuple(version) >= (2, 4) else "setuptools<70"]
    if version_tuple(version) < (2, 3):
        reqs.append("numpy<2")  # built against NumPy 1
    return reqs


RULE = (
    "1. the gradient where f is differentiable; 2. locally convex: the minimum-norm subgradient; "
    "3. locally concave: the minimum-norm supergradient; 4. f defined: the gradient by continuity (inf "
    "possible; any one where several values are possible); 5. f not defined: arbitrary",
    "PyTorch autograd notes, \"Gradients for non-differentiable functions\" (docs/source/notes/autograd.rst)",
)


RECORD = Framework(
    "torch", "PyTorch", "torch", "kinkcheck.frameworks.torch",
    ("reverse", "functional", "forward", "forward-ad", "inductor", "aot_eager", "vmap", "second-order"),
    ("o", "#d62728"), aliases={"F": "torch.nn.functional"}, devices=("cpu", "cuda", "metal"),
    # PyTorch 1.13.1 and the newest patch of every minor line from 2.0 (checked 2026-11-29, pip index versions)
    requirements=requirements,
    # cp312 from 2.2, cp313 from 2.5, cp314 from 2.9
    max_python={"1.13.1": (3, 11), "2.0.1": (3, 11), "2.1.2": (3, 11), "2.2.2": (3, 12), "2.3.1": (3, 12),
                "2.4.1": (3, 12), "2.5.1": (3, 13), "2.6.0": (3, 13), "2.7.1": (3, 13), "2.8.0": (3, 13)},
    # a CPU wheel on the dev machines, and the release the public cases P0-P2 were reported against
    tested="2.13.0", rule=RULE, documented={"*": "min-norm"},
)
