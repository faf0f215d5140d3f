"""PaddlePaddle's registry record: standard library only (:func:`kinkcheck.registry.read_record`)."""

from __future__ import annotations

from kinkcheck.registry import Framework


def requirements(version: str) -> list[str]:
    # setuptools: `import paddle` imports paddle.utils.cpp_extension, which imports it (uv's virtualenvs have none)
    return [f"paddlepaddle=={version}", "setuptools"]


RULE = (
    ("no framework-wide rule; documented choice: paddle.amax/paddle.amin share the gradient evenly among tied "
     "entries (their docstrings' note, which also says paddle.max/paddle.min propagate it to every tied entry: "
     "2.6 and 3.0 do, 3.1 and later share it evenly, and 3.3's own docstring example shows it on one entry); "
     "elsewhere at a kink the value is left open (the grad kernels decide: relu's is dout * (out > 0); "
     "maximum/minimum give a tie to y up to 3.0 and half to each argument from 3.1)"),
    ("python/paddle/tensor/math.py (amax, amin, max, min docstrings); kernels: "
     "paddle/phi/kernels/funcs/activation_functor.h (ReluGradFunctor), "
     "paddle/phi/kernels/impl/elementwise_grad_kernel_impl.h (MaxGradDx/MaxGradDy, MinGradDx/MinGradDy)"),
)
DOCUMENTED = dict.fromkeys(("paddle.amax", "paddle.amin", ".amax", ".amin"), "even")


RECORD = Framework(
    "paddle", "PaddlePaddle", "paddlepaddle", "kinkcheck.frameworks.paddle",
    ("reverse", "forward", "graph"), ("v", "#2ca02c"),
    # the newest patch of every minor line with a Python 3.11 wheel on the index: 2.6.2, then 3.0 to 3.3
    # (checked 2026-12-01, pip index versions: nothing older than 2.6.2 is offered for 3.11; no 2.7)
    requirements=requirements,
    # cp312 from 2.6, cp313 from 3.0, no cp314 yet (uv pip compile --python-version, 2026-12-01)
    max_python={"2.6.2": (3, 12), "3.0.0": (3, 13), "3.1.1": (3, 13), "3.2.2": (3, 13), "3.3.1": (3, 13)},
    tested="3.3.1", rule=RULE, documented=DOCUMENTED, import_first=True,
)
