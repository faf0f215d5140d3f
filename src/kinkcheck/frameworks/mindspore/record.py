"""MindSpore's registry record: standard library only (:func:`kinkcheck.registry.read_record`)."""

from __future__ import annotations

from kinkcheck.registry import Framework


def requirements(version: str) -> list[str]:
    # numpy<2: mindspore's extension modules are built against NumPy 1 (with NumPy 2.4 an op fails with
    # "A module that was compiled using NumPy 1.x cannot be run in NumPy 2.4.6")
    return [f"mindspore=={version}", "numpy<2"]


RULE = (
    ("no documented rule at a kink (the API docs of mindspore.ops relu, maximum, minimum, clamp, hardtanh, abs, "
     "max, amax and median say nothing of the derivative there, checked in 2.10.0): every value at a kink is "
     "open; each primitive's bprop decides (Maximum/Minimum share a tie evenly)"),
    ("mindspore/python/mindspore/ops/function/ docstrings; bprops: "
     "mindspore/ccsrc/frontend/expander/bprop/grad_ops/grad_math_ops.cc (REG_BPROP_BUILDER(\"Maximum\"), "
     "MinimumMaximumGrad)"),
)


RECORD = Framework(
    "mindspore", "MindSpore", "mindspore", "kinkcheck.frameworks.mindspore",
    # reverse only: mindspore.ops.jvp and graph mode compile from Python source (see the adapter)
    ("reverse",), ("h", "#17becf"), aliases={"ms": "mindspore"},
    # the newest patch of the last four minor lines (CPU wheels for Python 3.11, pip index versions,
    # checked 2026-12-01; 2.7.2 is 2.7's newest)
    requirements=requirements,
    # cp312 is the newest for all four (uv pip compile --python-version, 2026-12-01)
    max_python={"2.7.2": (3, 12), "2.8.0": (3, 12), "2.9.0": (3, 12), "2.10.0": (3, 12)},
    tested="2.10.0", rule=RULE,
    test_alone="MindSpore needs numpy<2 and JAX 0.10.2 numpy>=2.0 (and MindSpore's environment takes 2.7 GB)",
    # MindSpore's functional API (mindspore.ops.relu) under a refused word (ops); its I/O, callback and assignment
    # primitives are refused by the adapter
    exempt=(("mindspore", "ops"),),
)
