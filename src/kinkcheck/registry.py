"""The framework registry: one record per autodiff framework kinkcheck measures.

Everything that names a framework reads it here: the catalog's framework keys and program files
(:data:`kinkcheck.catalog.FRAMEWORKS`), the expression language's roots and aliases (``tf`` =
``tensorflow``), the adapter modules (:func:`kinkcheck.frameworks.get_adapter`), each framework's modes and
dtypes, the installed distribution the probe records, the CLI's ``--framework`` choices, the shard schema's
enum, the display name a citation uses, the marker of the report's plots, the conformance rule, and the
noxfile's version matrix and install requirements. A leaf module (standard library only): the noxfile
imports it into nox's own Python.

The module-level collections (:data:`FRAMEWORKS`, and the views other modules build with :func:`view`)
read :data:`REGISTRY` on every access, so a framework added with :func:`register` (the tests' fake
framework) reaches every consumer without an import-time copy going stale.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = ["DOCUMENTED_FAMILIES", "FRAMEWORKS", "MATRIX", "REGISTRY", "Framework", "aliases", "framework", "register",
           "registered", "view"]

#: Kinds of documented per-function choice a rule can name (``Framework.documented``):
#: ``zero`` — the derivative at the kink of a one-input function is 0 (``jax.nn.relu``);
#: ``even`` — the derivative is shared evenly among tied arguments or entries (the Clarke set's midpoint);
#: ``first`` — a tie goes to the first argument (its piece's gradient: ``tf.maximum``'s ``x >= y`` mask);
#: ``min-norm`` — PyTorch's autograd-notes rule: the minimum-norm subgradient (supergradient) where f is locally
#: convex (concave), else a limiting gradient "by continuity"; under the key ``"*"`` it covers every single
#: operation of the framework.
DOCUMENTED_FAMILIES: tuple[str, ...] = ("zero", "even", "first", "min-norm")


def _read_matrix() -> dict[str, tuple[str, ...]]:
    """Framework → its default version matrix, from ``matrix.toml`` beside this module (by path, not through
    the package: the noxfile loads this module on its own)."""
    import tomllib
    from pathlib import Path

    data = tomllib.loads(Path(__file__).with_name("matrix.toml").read_text(encoding="utf-8"))
    return {name: tuple(versions) for name, versions in data.items()}


#: Framework → the releases ``nox -s report`` probes, oldest first (``matrix.toml``; ``nox -s releases`` lists
#: the release lines published since and ``-- --write`` appends them).
MATRIX: Mapping[str, tuple[str, ...]] = _read_matrix()


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdigit())


@dataclass(frozen=True)
class Framework:
    """One framework.

    Attributes
    ----------
    name : str
        The key used everywhere (program files, shard environments, ``--framework``) and the root name of
        its call expressions: ``"torch"``, ``"tensorflow"``.
    display : str
        How prose names it: ``"PyTorch"``.
    distribution : str
        The package-index distribution whose version an environment records (``importlib.metadata``).
    adapter : str
        The module of its adapter (:class:`kinkcheck.frameworks.base.Adapter`), imported lazily.
    modes : tuple of str
        The differentiation modes its adapter implements, report order (a subset of
        :data:`kinkcheck.vocabulary.MODES`); ``reverse`` first.
    marker : tuple of (str, str)
        Matplotlib marker and colour of its measured values in the report's plots.
    aliases : dict
        Short names the expression language expands (``{"tf": "tensorflow"}``); unique across frameworks.
    dtypes : tuple of str
        dtypes it has (the probe records the others as unavailable, naming the framework's lack).
    devices : tuple of str
        Devices its adapter can use when present.
    versions : tuple of str
        The default version matrix (newest patch of each minor line that installs for Python 3.11 on
        Linux x86-64), oldest first; the last is the newest release.
    requirements : callable
        ``version`` → pip requirement strings for one probe environment.
    max_python : dict
        Release → the newest CPython (major, minor) it has wheels for; a release not listed has wheels for
        every Python the project supports.
    min_python : dict
        Release → the oldest CPython (major, minor) it installs on (``Requires-Python``), for a release that
        drops the project's oldest (3.11): JAX from 0.11, PyTensor from 3.1.
    tested : str or None
        The release the test suite installs (None: the tests skip its adapter tests, saying so).
    import_first : bool
        Import it before the other frameworks when one process loads several (``kinkcheck check``, the tests):
        PaddlePaddle segfaults when imported after TensorFlow (``import tensorflow, paddle``; the other order works).
    test_alone : str or None
        Why its tested release cannot share the test virtualenv (a conflicting pin); then ``nox -s tests`` leaves
        it out and ``nox -s "framework_tests(<name>)"`` tests it in its own virtualenv.
    device_requirements : dict
        Device → version → what an environment on that device installs instead of ``requirements`` (None: the
        release has no build for it from a package registry); see :meth:`requirements_for`.
    rule : tuple of (str, str)
        Its documented rule at a kink and where it is documented; an empty text means none is documented.
    documented : dict
        Dotted function name (or ``".method"`` for a method of an input) → one of
        :data:`DOCUMENTED_FAMILIES`: the per-function choices the rule names.
    """

    name: str
    display: str
    distribution: str
    adapter: str
    modes: tuple[str, ...]
    marker: tuple[str, str]
    aliases: Mapping[str, str] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ("float64", "float32", "float16", "bfloat16")
    devices: tuple[str, ...] = ("cpu",)
    versions: tuple[str, ...] = ()
    requirements: Callable[[str], list[str]] = field(default=lambda v: [], compare=False, repr=False)
    max_python: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    min_python: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    tested: str | None = None
    rule: tuple[str, str] = ("", "")
    documented: Mapping[str, str] = field(default_factory=dict)
    test_alone: str | None = None
    import_first: bool = False
    device_requirements: Mapping[str, Callable[[str], list[str] | None]] = field(default_factory=dict, compare=False,
                                                                               repr=False)

    def requirements_for(self, version: str, device: str = "cpu") -> list[str] | None:
        """What an environment of ``version`` on ``device`` installs: :attr:`requirements` on CPU and on a device
        whose builds are the default wheels (torch's Linux wheels on PyPI are CUDA builds); a device's own
        (:attr:`device_requirements`, e.g. ``jax[cuda12]``) otherwise; None when the release has no build for
        ``device`` or the framework no such device."""
        if device not in self.devices:
            return None
        own = self.device_requirements.get(device)
        return list(self.requirements(version)) if own is None else own(version)

    @property
    def newest(self) -> str | None:
        """The newest release of the matrix (None when it has none)."""
        return self.versions[-1] if self.versions else None


def _torch_requirements(version: str) -> list[str]:
    # setuptools: inductor imports it at compile time (torch <= 2.10); uv's virtualenvs have none. torch 2.1
    # imports pkg_resources, which recent setuptools no longer ships: an older setuptools for old torch.
    reqs = [f"torch=={version}", "setuptools" if _version_tuple(version) >= (2, 4) else "setuptools<70"]
    if _version_tuple(version) < (2, 3):
        reqs.append("numpy<2")  # built against NumPy 1
    return reqs


def _jax_requirements(version: str) -> list[str]:
    reqs = [f"jax=={version}", f"jaxlib=={version}"]
    if _version_tuple(version) < (0, 4, 26):
        reqs += ["numpy<2", "scipy<1.13"]
    return reqs


def _jax_cuda_requirements(version: str) -> list[str] | None:
    # jax[cuda12] (the jax-cuda12-plugin and -pjrt wheels, CUDA libraries from PyPI) from 0.4.26; before it the
    # CUDA jaxlib came from Google's own find-links page, not a package registry: not measured there.
    if _version_tuple(version) < (0, 4, 26):
        return None
    return [f"jax[cuda12]=={version}", *_jax_requirements(version)[1:]]


_TORCH_RULE = (
    "1. the gradient where f is differentiable; 2. locally convex: the minimum-norm subgradient; "
    "3. locally concave: the minimum-norm supergradient; 4. f defined: the gradient by continuity (inf "
    "possible; any one where several values are possible); 5. f not defined: arbitrary",
    "PyTorch autograd notes, \"Gradients for non-differentiable functions\" (docs/source/notes/autograd.rst)",
)
_JAX_RULE = (
    "no framework-wide rule; documented choices: jax.nn.relu'(0) = 0 and jax.nn.relu6'(0) = relu6'(6) = 0; "
    "lax.max/lax.min (jnp.maximum, jnp.minimum, jnp.clip) and the reductions jnp.max/jnp.min share the "
    "derivative evenly among tied arguments; elsewhere at a kink the value is left open",
    "jax/_src/nn/functions.py (relu, relu6 docstrings); jax/_src/lax/lax.py (_balanced_eq in the max_p/min_p "
    "JVPs, _reduce_chooser_jvp_rule)",
)
_JAX_DOCUMENTED = {
    **dict.fromkeys(("jax.nn.relu", "jax.nn.relu6"), "zero"),
    **dict.fromkeys(("jax.numpy.maximum", "jax.numpy.minimum", "jax.numpy.clip", "jax.lax.max", "jax.lax.min",
                     "jax.numpy.max", "jax.numpy.min", "jax.numpy.amax", "jax.numpy.amin", ".max", ".min"), "even"),
}

def _autograd_requirements(version: str) -> list[str]:
    reqs = [f"autograd=={version}"]
    if _version_tuple(version) < (1, 7):
        reqs.append("numpy<2")  # 1.5 uses numpy.msort, 1.6 numpy.linalg.linalg: both gone in NumPy 2
    return reqs


_AUTOGRAD_RULE = (
    "no framework-wide rule; its derivative rules choose: anp.maximum/anp.minimum/anp.fmax/anp.fmin share a tie "
    "evenly between the arguments, anp.max/anp.min/anp.amax/anp.amin share it evenly among the tied entries; "
    "anp.clip has derivative 0 at either bound; anp.abs, anp.fabs (and anp.absolute from 1.9.0) have 0 at 0; "
    "elsewhere at a kink the value is left open",
    "autograd/numpy/numpy_vjps.py and numpy_jvps.py (balanced_eq in the maximum/minimum/fmax/fmin rules, "
    "grad_chooser and fwd_grad_chooser for max/min/amax/amin, the clip rule's ans != a_min and ans != a_max, "
    "replace_zero in the abs rule, sign(x) in the fabs rule; absolute fixed in HIPS/autograd#712)",
)
_AUTOGRAD_DOCUMENTED = {
    **dict.fromkeys(("autograd.numpy.maximum", "autograd.numpy.minimum", "autograd.numpy.fmax", "autograd.numpy.fmin",
                     "autograd.numpy.max", "autograd.numpy.min", "autograd.numpy.amax", "autograd.numpy.amin", ".max",
                     ".min"), "even"),
    **dict.fromkeys(("autograd.numpy.clip", "autograd.numpy.abs", "autograd.numpy.absolute", "autograd.numpy.fabs"),
                    "zero"),
}

def _paddle_requirements(version: str) -> list[str]:
    # setuptools: `import paddle` imports paddle.utils.cpp_extension, which imports it (uv's virtualenvs have none)
    return [f"paddlepaddle=={version}", "setuptools"]


_PADDLE_RULE = (
    ("no framework-wide rule; documented choice: paddle.amax/paddle.amin share the gradient evenly among tied "
     "entries (their docstrings' note, which also says paddle.max/paddle.min propagate it to every tied entry: "
     "2.6 and 3.0 do, 3.1 and later share it evenly, and 3.3's own docstring example shows it on one entry); "
     "elsewhere at a kink the value is left open (the grad kernels decide: relu's is dout * (out > 0); "
     "maximum/minimum give a tie to y up to 3.0 and half to each argument from 3.1)"),
    ("python/paddle/tensor/math.py (amax, amin, max, min docstrings); kernels: "
     "paddle/phi/kernels/funcs/activation_functor.h (ReluGradFunctor), "
     "paddle/phi/kernels/impl/elementwise_grad_kernel_impl.h (MaxGradDx/MaxGradDy, MinGradDx/MinGradDy)"),
)
_PADDLE_DOCUMENTED = dict.fromkeys(("paddle.amax", "paddle.amin", ".amax", ".amin"), "even")


_TENSORFLOW_RULE = (
    "no framework-wide rule; documented in the gradient code: tf.nn.relu'(0) = 0 and tf.nn.relu6'(0) = "
    "relu6'(6) = 0 (ReluGrad: \"When the activation is exactly zero, we do not propagate the associated "
    "gradient value\"; Relu6Grad, at zero or six: \"we arbitrarily choose to not propagate\" it); "
    "tf.maximum/tf.minimum give a tie to the first argument (grad * (x >= y) to x for Maximum, grad * (x <= y) "
    "for Minimum), so tf.clip_by_value, a minimum then a maximum, passes the gradient at both bounds; the "
    "reductions tf.reduce_max/tf.reduce_min divide it among tied entries; elsewhere at a kink the value is left "
    "open",
    "tensorflow/core/kernels/relu_op_functor.h (ReluGrad, Relu6Grad); tensorflow/python/ops/math_grad.py "
    "(_MaximumGrad, _MinimumGrad via _MaximumMinimumGrad; _MinOrMaxGrad); tensorflow/python/ops/clip_ops.py "
    "(clip_by_value)",
)
# tnp.maximum(x, 0) and tnp.clip(x, 0, None) are tf.nn.relu (a fast path in numpy_ops/np_math_ops.py maximum),
# so tnp.maximum and tnp.clip are not "first"; tnp.minimum is math_ops.minimum.
_TENSORFLOW_DOCUMENTED = {
    **dict.fromkeys(("tensorflow.nn.relu", "tensorflow.nn.relu6"), "zero"),
    **dict.fromkeys(("tensorflow.reduce_max", "tensorflow.reduce_min", "tensorflow.math.reduce_max",
                     "tensorflow.math.reduce_min"), "even"),
    **dict.fromkeys(("tensorflow.maximum", "tensorflow.minimum", "tensorflow.math.maximum", "tensorflow.math.minimum",
                     "tensorflow.clip_by_value", "tensorflow.experimental.numpy.minimum"), "first"),
}

_PYTENSOR_RULE = (
    "no framework-wide rule; each op's gradient (L_op) chooses: pt.maximum/pt.minimum give a tie wholly to the "
    "first argument; pt.abs has derivative 0 at 0; pt.clip has derivative 1 at either bound; pt.max/pt.min give "
    "every tied entry the whole derivative; elsewhere at a kink the value is left open",
    "pytensor/scalar/basic.py (Maximum.L_op and Minimum.L_op: eq(output, x) * gz to x, the rest to y; Abs.L_op: "
    "gz * sign(x); Clip.L_op: ((x >= min) & (x <= max)) * gz); pytensor/tensor/math.py (Max.L_op: eq(max, x) * g)",
)
_PYTENSOR_DOCUMENTED = {
    **dict.fromkeys(("pytensor.tensor.maximum", "pytensor.tensor.minimum", "pytensor.tensor.math.maximum",
                     "pytensor.tensor.math.minimum"), "first"),
    **dict.fromkeys(("pytensor.tensor.abs", "pytensor.tensor.math.abs"), "zero"),
}

def _mlx_requirements(version: str) -> list[str]:
    # Linux wheels of mlx >= 0.26 carry no backend: the CPU one is the mlx-cpu wheel, the "cpu" extra;
    # older Linux wheels bundle it and have no such extra. macOS wheels pull mlx-metal (CPU and Metal).
    reqs = [f"mlx[cpu]=={version}" if _version_tuple(version) >= (0, 26) else f"mlx=={version}"]
    if _version_tuple(version) >= (0, 32):
        # the extra's marker is platform_system == "Linux", but mlx-cpu has Windows wheels from 0.32: named
        # outright there, else Windows gets mlx without a backend
        reqs.append(f'mlx-cpu=={version}; platform_system == "Windows"')
    return reqs


_MLX_RULE = (
    "no documented rule at a kink (every value there is open); the choices in MLX's code: mx.maximum and "
    "mx.minimum give a tie to the second argument (so mlx.nn.relu = mx.maximum(x, 0) has 0 at 0 and "
    "mx.maximum(0.0, x) has 1), mx.abs'(0) = sign(0) = 0, and a tied mx.max/mx.min reduction shares the "
    "derivative evenly in reverse mode but gives it all to the argmax/argmin entry (the first) in forward mode",
    "mlx/primitives.cpp (Maximum::vjp/jvp: masks a > b and a <= b; Minimum::vjp/jvp; Abs::vjp; Reduce::vjp/jvp); "
    "python/mlx/nn/layers/activations.py (relu)",
)
_TINYGRAD_RULE = (
    "no documented rule at a kink (every value there is open); the choices in tinygrad's code: Ops.MAX "
    "(Tensor.maximum, Tensor.minimum) gives each tied argument half, a max/min reduction shares the "
    "derivative evenly among the tied entries, Tensor.relu is (x > 0).where(x, 0) (0 at 0), Tensor.clamp/clip "
    "(x < lo).where(lo, x) (1 at a bound), Tensor.abs x * x.sign() (0 at 0)",
    "tinygrad/gradient.py (pm_gradient: Ops.MAX, reduce_gradient; tinygrad/mixin/gradient.py from 0.14); "
    "tinygrad/tensor.py (relu, clamp, abs; tinygrad/mixin/elementwise.py from 0.14)",
)


def _mindspore_requirements(version: str) -> list[str]:
    # numpy<2: mindspore's extension modules are built against NumPy 1 (with NumPy 2.4 an op fails with
    # "A module that was compiled using NumPy 1.x cannot be run in NumPy 2.4.6")
    return [f"mindspore=={version}", "numpy<2"]


_MINDSPORE_RULE = (
    ("no documented rule at a kink (the API docs of mindspore.ops relu, maximum, minimum, clamp, hardtanh, abs, "
     "max, amax and median say nothing of the derivative there, checked in 2.10.0): every value at a kink is "
     "open; each primitive's bprop decides (Maximum/Minimum share a tie evenly)"),
    ("mindspore/python/mindspore/ops/function/ docstrings; bprops: "
     "mindspore/ccsrc/frontend/expander/bprop/grad_ops/grad_math_ops.cc (REG_BPROP_BUILDER(\"Maximum\"), "
     "MinimumMaximumGrad)"),
)


#: Framework name → record, report order.
REGISTRY: dict[str, Framework] = {f.name: f for f in (
    Framework(
        "torch", "PyTorch", "torch", "kinkcheck.frameworks.torch",
        ("reverse", "functional", "forward", "forward-ad", "inductor", "aot_eager", "vmap", "second-order"),
        ("o", "#d62728"), aliases={"F": "torch.nn.functional"}, devices=("cpu", "cuda", "metal"),
        # PyTorch 1.13.1 and the newest patch of every minor line from 2.0 (checked 2026-11-29, pip index versions)
        versions=MATRIX.get("torch", ()),
        requirements=_torch_requirements,
        # cp312 from 2.2, cp313 from 2.5, cp314 from 2.9
        max_python={"1.13.1": (3, 11), "2.0.1": (3, 11), "2.1.2": (3, 11), "2.2.2": (3, 12), "2.3.1": (3, 12),
                    "2.4.1": (3, 12), "2.5.1": (3, 13), "2.6.0": (3, 13), "2.7.1": (3, 13), "2.8.0": (3, 13)},
        # a CPU wheel on the dev machines, and the release the public cases P0-P2 were reported against
        tested="2.13.0", rule=_TORCH_RULE, documented={"*": "min-norm"},
    ),
    Framework(
        "jax", "JAX", "jax", "kinkcheck.frameworks.jax",
        ("reverse", "jit", "forward", "jacfwd", "jacrev", "vmap", "second-order"), ("s", "#1f77b4"),
        aliases={"jnp": "jax.numpy", "lax": "jax.lax"}, devices=("cpu", "cuda"),
        # 0.4.13, 0.4.20, 0.4.26, 0.4.30, 0.4.38 and the newest patch of every minor line from 0.5
        versions=MATRIX.get("jax", ()),
        requirements=_jax_requirements, device_requirements={"cuda": _jax_cuda_requirements},
        # jaxlib: cp312 from 0.4.17, cp313 from 0.4.34, cp314 from 0.8
        max_python={"0.4.13": (3, 11), "0.4.20": (3, 12), "0.4.26": (3, 12), "0.4.30": (3, 12), "0.4.38": (3, 13),
                    "0.5.3": (3, 13), "0.6.2": (3, 13), "0.7.2": (3, 13)},
        min_python={"0.11.2": (3, 12), "0.12.0.1": (3, 12)},  # Requires-Python >= 3.12 (jax and jaxlib)
        tested="0.10.2", rule=_JAX_RULE, documented=_JAX_DOCUMENTED,
    ),
    Framework(
        "tensorflow", "TensorFlow", "tensorflow-cpu", "kinkcheck.frameworks.tensorflow",
        ("reverse", "forward", "graph", "jit", "second-order"), ("^", "#ff7f0e"),
        aliases={"tf": "tensorflow", "tnp": "tensorflow.experimental.numpy"},
        # the newest patch of every minor line with a cp311 wheel (checked 2026-12-01, pip index versions)
        versions=MATRIX.get("tensorflow", ()),
        # tensorflow-cpu pins its own numpy (< 2 before 2.18), protobuf and ml_dtypes; uv resolves them beside
        # kinkcheck's for every release of the matrix
        requirements=lambda v: [f"tensorflow-cpu=={v}"],
        # cp312 from 2.16, cp313 from 2.20; none has cp314
        max_python={**dict.fromkeys(("2.12.1", "2.13.1", "2.14.1", "2.15.1"), (3, 11)),
                    **dict.fromkeys(("2.16.2", "2.17.1", "2.18.1", "2.19.1"), (3, 12)),
                    "2.20.0": (3, 13), "2.21.0": (3, 13)},
        tested="2.21.0", rule=_TENSORFLOW_RULE, documented=_TENSORFLOW_DOCUMENTED,
    ),
    Framework(
        "paddle", "PaddlePaddle", "paddlepaddle", "kinkcheck.frameworks.paddle",
        ("reverse", "forward", "graph"), ("v", "#2ca02c"),
        # the newest patch of every minor line with a Python 3.11 wheel on the index: 2.6.2, then 3.0 to 3.3
        # (checked 2026-12-01, pip index versions: nothing older than 2.6.2 is offered for 3.11; no 2.7)
        versions=MATRIX.get("paddle", ()),
        requirements=_paddle_requirements,
        # cp312 from 2.6, cp313 from 3.0, no cp314 yet (uv pip compile --python-version, 2026-12-01)
        max_python={"2.6.2": (3, 12), "3.0.0": (3, 13), "3.1.1": (3, 13), "3.2.2": (3, 13), "3.3.1": (3, 13)},
        tested="3.3.1", rule=_PADDLE_RULE, documented=_PADDLE_DOCUMENTED, import_first=True,
    ),
    Framework(
        "mlx", "MLX", "mlx", "kinkcheck.frameworks.mlx",
        ("reverse", "jit", "forward", "vmap", "second-order"), ("D", "#9467bd"), aliases={"mx": "mlx.core"},
        devices=("cpu", "metal"),
        # the newest patch of every minor line with a Linux x86-64 wheel for Python 3.11 (checked 2026-12-01:
        # the index has 0.2.0, 0.21.1 and 0.25.2 - 0.32.4); 0.2.0 and 0.21.1 have no float64
        versions=MATRIX.get("mlx", ()),
        requirements=_mlx_requirements,
        # cp313 from 0.21, cp314 from 0.29
        max_python={"0.2.0": (3, 12), "0.21.1": (3, 13), "0.25.2": (3, 13), "0.26.5": (3, 13), "0.27.1": (3, 13),
                    "0.28.0": (3, 13)},
        tested="0.32.4", rule=_MLX_RULE,
    ),
    Framework(
        "tinygrad", "tinygrad", "tinygrad", "kinkcheck.frameworks.tinygrad",
        ("reverse", "jit"), ("P", "#8c564b"),
        # the newest patch of each minor line up to 0.14.0 (pure Python: every Python); without clang the
        # adapter runs tinygrad's PYTHON device, which before 0.13 has no float16 on Python 3.11 and no bfloat16
        versions=MATRIX.get("tinygrad", ()),
        requirements=lambda v: [f"tinygrad=={v}"],
        tested="0.14.0", rule=_TINYGRAD_RULE,
    ),
    Framework(
        "autograd", "HIPS autograd", "autograd", "kinkcheck.frameworks.autograd",
        ("reverse", "forward", "second-order"), ("X", "#e377c2"), aliases={"anp": "autograd.numpy"},
        dtypes=("float64", "float32", "float16"),  # NumPy has no bfloat16
        # the newest patch of every minor line that runs on Python 3.11 (checked 2026-12-01: 1.3 and 1.4
        # import inspect.getargspec, removed in 3.11)
        versions=MATRIX.get("autograd", ()),
        requirements=_autograd_requirements,
        max_python={"1.5": (3, 12), "1.6.2": (3, 12)},  # numpy<2: cp312 wheels at most
        tested="1.9.1", rule=_AUTOGRAD_RULE, documented=_AUTOGRAD_DOCUMENTED,
    ),
    Framework(
        "pytensor", "PyTensor", "pytensor", "kinkcheck.frameworks.pytensor",
        ("reverse", "forward", "jit", "second-order"), ("*", "#bcbd22"), aliases={"pt": "pytensor.tensor"},
        dtypes=("float64", "float32", "float16"),  # NumPy dtypes: no bfloat16
        # the newest patch of the minor lines from 2.36 (checked 2026-12-01); 3.1 on need
        # Python >= 3.12
        versions=MATRIX.get("pytensor", ()),
        requirements=lambda v: [f"pytensor=={v}"],
        min_python={"3.1.3": (3, 12), "3.2.4": (3, 12), "3.3.8": (3, 12)},  # Requires-Python >= 3.12
        tested="3.0.7", rule=_PYTENSOR_RULE, documented=_PYTENSOR_DOCUMENTED,
    ),
    Framework(
        "mindspore", "MindSpore", "mindspore", "kinkcheck.frameworks.mindspore",
        # reverse only: mindspore.ops.jvp and graph mode compile from Python source (see the adapter)
        ("reverse",), ("h", "#17becf"), aliases={"ms": "mindspore"},
        # the newest patch of the last four minor lines (CPU wheels for Python 3.11, pip index versions,
        # checked 2026-12-01; 2.7.2 is 2.7's newest)
        versions=MATRIX.get("mindspore", ()),
        requirements=_mindspore_requirements,
        # cp312 is the newest for all four (uv pip compile --python-version, 2026-12-01)
        max_python={"2.7.2": (3, 12), "2.8.0": (3, 12), "2.9.0": (3, 12), "2.10.0": (3, 12)},
        tested="2.10.0", rule=_MINDSPORE_RULE,
        test_alone="MindSpore needs numpy<2 and JAX 0.10.2 numpy>=2.0 (and MindSpore's environment takes 2.7 GB)",
    ),
)}


class _Names(Sequence[str]):
    """The registered names, report order, read from :data:`REGISTRY` on each access (a live tuple)."""

    def __getitem__(self, i: Any) -> Any:
        return tuple(REGISTRY)[i]

    def __len__(self) -> int:
        return len(REGISTRY)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(REGISTRY))

    def __contains__(self, name: object) -> bool:
        return name in REGISTRY

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, (tuple, list, _Names)) else other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


#: The registered framework names, report order (live: reads :data:`REGISTRY`).
FRAMEWORKS: Sequence[str] = _Names()

T = TypeVar("T")


class _View(Mapping[str, T]):
    """Framework name → ``get(record)``, read from :data:`REGISTRY` on each access."""

    def __init__(self, get: Callable[[Framework], T]) -> None:
        self._get = get

    def __getitem__(self, name: str) -> T:
        return self._get(REGISTRY[name])

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(REGISTRY))

    def __len__(self) -> int:
        return len(REGISTRY)

    def __eq__(self, other: object) -> bool:
        return dict(self) == (dict(other) if isinstance(other, Mapping) else other)

    def __repr__(self) -> str:
        return repr(dict(self))


def view(get: Callable[[Framework], T]) -> Mapping[str, T]:
    """A live mapping framework name → ``get(record)`` (``view(lambda f: f.display)``)."""
    return _View(get)


def framework(name: str) -> Framework:
    """The record of ``name``.

    Raises
    ------
    KeyError
        With a one-line message naming the known frameworks.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown framework {name!r} (known: {', '.join(REGISTRY)})") from None


def aliases() -> dict[str, str]:
    """Every framework's expression aliases, alias → dotted path (``{"jnp": "jax.numpy", "tf": "tensorflow"}``)."""
    return {a: path for f in REGISTRY.values() for a, path in f.aliases.items()}


def register(record: Framework) -> None:
    """Add a framework (after the others in report order).

    Raises
    ------
    ValueError
        The name is taken, or an alias is another framework's name or alias.
    """
    if record.name in REGISTRY:
        raise ValueError(f"framework {record.name!r} is already registered")
    taken = set(REGISTRY) | set(aliases())
    clash = sorted((set(record.aliases) | {record.name}) & taken)
    if clash:
        raise ValueError(f"framework {record.name!r}: {', '.join(clash)} already names a framework or alias")
    REGISTRY[record.name] = record


@contextlib.contextmanager
def registered(record: Framework) -> Iterator[Framework]:
    """:func:`register` for the duration of a ``with`` block (tests)."""
    register(record)
    try:
        yield record
    finally:
        REGISTRY.pop(record.name, None)
