"""tinygrad's registry record: standard library only (:func:`kinkcheck.registry.read_record`)."""

from __future__ import annotations

from kinkcheck.registry import Framework


RULE = (
    "no documented rule at a kink (every value there is open); the choices in tinygrad's code: Ops.MAX "
    "(Tensor.maximum, Tensor.minimum) gives each tied argument half, a max/min reduction shares the "
    "derivative evenly among the tied entries, Tensor.relu is (x > 0).where(x, 0) (0 at 0), Tensor.clamp/clip "
    "(x < lo).where(lo, x) (1 at a bound), Tensor.abs x * x.sign() (0 at 0)",
    "tinygrad/gradient.py (pm_gradient: Ops.MAX, reduce_gradient; tinygrad/mixin/gradient.py from 0.14); "
    "tinygrad/tensor.py (relu, clamp, abs; tinygrad/mixin/elementwise.py from 0.14)",
)


RECORD = Framework(
    "tinygrad", "tinygrad", "tinygrad", "kinkcheck.frameworks.tinygrad",
    ("reverse", "jit"), ("P", "#8c564b"),
    # the newest patch of each minor line up to 0.14.0 (pure Python: every Python); without clang the
    # adapter runs tinygrad's PYTHON device, which before 0.13 has no float16 on Python 3.11 and no bfloat16
    requirements=lambda v: [f"tinygrad=={v}"],
    tested="0.14.0", rule=RULE,
)
