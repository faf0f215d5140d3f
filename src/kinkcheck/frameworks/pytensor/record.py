"""PyTensor's registry record: standard library only (:func:`kinkcheck.registry.read_record`)."""

from __future__ import annotations

from kinkcheck.registry import Framework


RULE = (
    "no framework-wide rule; each op's gradient (L_op) chooses: pt.maximum/pt.minimum give a tie wholly to the "
    "first argument; pt.abs has derivative 0 at 0; pt.clip has derivative 1 at either bound; pt.max/pt.min give "
    "every tied entry the whole derivative; elsewhere at a kink the value is left open",
    "pytensor/scalar/basic.py (Maximum.L_op and Minimum.L_op: eq(output, x) * gz to x, the rest to y; Abs.L_op: "
    "gz * sign(x); Clip.L_op: ((x >= min) & (x <= max)) * gz); pytensor/tensor/math.py (Max.L_op: eq(max, x) * g)",
)
DOCUMENTED = {
    **dict.fromkeys(("pytensor.tensor.maximum", "pytensor.tensor.minimum", "pytensor.tensor.math.maximum",
                     "pytensor.tensor.math.minimum"), "first"),
    **dict.fromkeys(("pytensor.tensor.abs", "pytensor.tensor.math.abs"), "zero"),
}


RECORD = Framework(
    "pytensor", "PyTensor", "pytensor", "kinkcheck.frameworks.pytensor",
    ("reverse", "forward", "jit", "second-order"), ("*", "#bcbd22"), aliases={"pt": "pytensor.tensor"},
    dtypes=("float64", "float32", "float16"),  # NumPy dtypes: no bfloat16
    # the newest patch of the minor lines from 2.36 (checked 2026-12-01); 3.1 on need
    # Python >= 3.12
    requirements=lambda v: [f"pytensor=={v}"],
    min_python={"3.1.3": (3, 12), "3.2.4": (3, 12), "3.3.8": (3, 12)},  # Requires-Python >= 3.12
    tested="3.0.7", rule=RULE, documented=DOCUMENTED,
    pure_setters=frozenset({"set_subtensor"}),  # a new variable, the subtensor written into a copy
)
