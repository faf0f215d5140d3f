"""HIPS autograd's registry record: standard library only (:func:`kinkcheck.registry.read_record`)."""

from __future__ import annotations

from kinkcheck.registry import Framework, version_tuple


def requirements(version: str) -> list[str]:
    reqs = [f"autograd=={version}"]
    if version_tuple(version) < (1, 7):
        reqs.append("numpy<2")  # 1.5 uses numpy.msort, 1.6 numpy.linalg.linalg: both gone in NumPy 2
    return reqs


RULE = (
    "no framework-wide rule; its derivative rules choose: anp.maximum/anp.minimum/anp.fmax/anp.fmin share a tie "
    "evenly between the arguments, anp.max/anp.min/anp.amax/anp.amin share it evenly among the tied entries; "
    "anp.clip has derivative 0 at either bound; anp.abs, anp.fabs (and anp.absolute from 1.9.0) have 0 at 0; "
    "elsewhere at a kink the value is left open",
    "autograd/numpy/numpy_vjps.py and numpy_jvps.py (balanced_eq in the maximum/minimum/fmax/fmin rules, "
    "grad_chooser and fwd_grad_chooser for max/min/amax/amin, the clip rule's ans != a_min and ans != a_max, "
    "replace_zero in the abs rule, sign(x) in the fabs rule; absolute fixed in HIPS/autograd#712)",
)
DOCUMENTED = {
    **dict.fromkeys(("autograd.numpy.maximum", "autograd.numpy.minimum", "autograd.numpy.fmax", "autograd.numpy.fmin",
                     "autograd.numpy.max", "autograd.numpy.min", "autograd.numpy.amax", "autograd.numpy.amin", ".max",
                     ".min"), "even"),
    **dict.fromkeys(("autograd.numpy.clip", "autograd.numpy.abs", "autograd.numpy.absolute", "autograd.numpy.fabs"),
                    "zero"),
}


RECORD = Framework(
    "autograd", "HIPS autograd", "autograd", "kinkcheck.frameworks.autograd",
    ("reverse", "forward", "second-order"), ("X", "#e377c2"), aliases={"anp": "autograd.numpy"},
    dtypes=("float64", "float32", "float16"),  # NumPy has no bfloat16
    # the newest patch of every minor line that runs on Python 3.11 (checked 2026-12-01: 1.3 and 1.4
    # import inspect.getargspec, removed in 3.11)
    requirements=requirements,
    max_python={"1.5": (3, 12), "1.6.2": (3, 12)},  # numpy<2: cp312 wheels at most
    tested="1.9.1", rule=RULE, documented=DOCUMENTED,
)
