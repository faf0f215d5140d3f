"""MLX's registry record: standard library only (:func:`kinkcheck.registry.read_record`)."""

from __future__ import annotations

from kinkcheck.registry import Framework, version_tuple


def requirements(version: str) -> list[str]:
    # Linux wheels of mlx >= 0.26 carry no backend: the CPU one is the mlx-cpu wheel, the "cpu" extra;
    # older Linux wheels bundle it and have no such extra. macOS wheels pull mlx-metal (CPU and Metal).
    reqs = [f"mlx[cpu]=={version}" if version_tuple(version) >= (0, 26) else f"mlx=={version}"]
    if version_tuple(version) >= (0, 32):
        # the extra's marker is platform_system == "Linux", but mlx-cpu has Windows wheels from 0.32: named
        # outright there, else Windows gets mlx without a backend
        reqs.append(f'mlx-cpu=={version}; platform_system == "Windows"')
    return reqs


RULE = (
    "no documented rule at a kink (every value there is open); the choices in MLX's code: mx.maximum and "
    "mx.minimum give a tie to the second argument (so mlx.nn.relu = mx.maximum(x, 0) has 0 at 0 and "
    "mx.maximum(0.0, x) has 1), mx.abs'(0) = sign(0) = 0, and a tied mx.max/mx.min reduction shares the "
    "derivative evenly in reverse mode but gives it all to the argmax/argmin entry (the first) in forward mode",
    "mlx/primitives.cpp (Maximum::vjp/jvp: masks a > b and a <= b; Minimum::vjp/jvp; Abs::vjp; Reduce::vjp/jvp); "
    "python/mlx/nn/layers/activations.py (relu)",
)


RECORD = Framework(
    "mlx", "MLX", "mlx", "kinkcheck.frameworks.mlx",
    ("reverse", "jit", "forward", "vmap", "second-order"), ("D", "#9467bd"), aliases={"mx": "mlx.core"},
    devices=("cpu", "metal"),
    # the newest patch of every minor line with a Linux x86-64 wheel for Python 3.11 (checked 2026-12-01:
    # the index has 0.2.0, 0.21.1 and 0.25.2 - 0.32.4); 0.2.0 and 0.21.1 have no float64
    requirements=requirements,
    # cp313 from 0.21, cp314 from 0.29
    max_python={"0.2.0": (3, 12), "0.21.1": (3, 13), "0.25.2": (3, 13), "0.26.5": (3, 13), "0.27.1": (3, 13),
                "0.28.0": (3, 13)},
    tested="0.32.4", rule=RULE,
)
