"""TensorFlow adapter: evaluates call expressions with ``tf.Tensor`` values (distribution ``tensorflow-cpu``).

Modes (:data:`kinkcheck.vocabulary.MODE_INFO`):

* ``reverse`` — ``tf.GradientTape``: ``tape.gradient(y, inputs)``, which sends ones into every output
  component (the gradient of the output's sum);
* ``forward`` — ``tf.autodiff.ForwardAccumulator`` along each input component's unit tangent, the JVP of
  the output's sum;
* ``graph`` — the reverse-mode computation (tape and program) traced by ``tf.function`` and run as a graph;
* ``jit`` — the same with ``tf.function(jit_compile=True)``: compiled by XLA;
* ``second-order`` — nested tapes: the gradient of the sum of the gradient, the Hessian times ones
  (``H @ 1``).

``tf.function`` is called with ``autograph=False``: a call expression has no Python control flow for
AutoGraph to convert, and so the traced graph is the same one a user's ``@tf.function`` records.

``tape.gradient`` (and ``ForwardAccumulator.jvp``) answer ``None`` for an input the output does not depend
on, and through an op whose gradient function returns ``None`` (``tf.floor``, ``tf.round``:
``_FloorGrad``, ``_RoundGrad`` in ``math_grad.py``); this adapter asks for
``unconnected_gradients=tf.UnconnectedGradients.ZERO`` and so returns zeros there, as JAX and PyTorch do.

Where TensorFlow defines a kink's derivative: ``tensorflow/python/ops/nn_grad.py`` (``_ReluGrad``: the
``ReluGrad`` kernel passes the gradient where ``x > 0``, so 0 at 0; ``_Relu6Grad``: ``0 < x < 6``),
``tensorflow/python/ops/math_grad.py`` (``_MaximumMinimumGrad``: a tie goes to the first argument,
``x >= y`` for ``maximum``, ``x <= y`` for ``minimum``; ``_AbsGrad``: ``sign(x)``, 0 at 0;
``_MaxOrMinGrad``: a reduction's gradient shared evenly among tied entries), and
``tensorflow/python/ops/clip_ops.py`` (``clip_by_value``: the gradient passes at the bounds, ``x >= lo``
and ``x <= hi``). TensorFlow documents no framework-wide rule.
"""

from __future__ import annotations

import logging
import os
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kinkcheck.frameworks.base import (Adapter, DeviceAbsent, ImportGuard, ProgramError, by_unit_tangents, check_dtype,
                                       check_mode, processor_name, resolve, returned, start_up_notices_dropped)
from kinkcheck.language import expr as ex

# TensorFlow's C++ start-up notices (CPU features, oneDNN) would reach `kinkcheck grad`'s stderr; a user's
# own setting wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

GUARD = ImportGuard()
with GUARD:
    import numpy as np

    with start_up_notices_dropped(r"All log messages before absl::InitializeLog\(\) is called",
                                  r"oneDNN custom operations are on", r"port\.cc:\d+\] .*TF_ENABLE_ONEDNN_OPTS",
                                  r"This TensorFlow binary is optimized to use available CPU instructions",
                                  r"rebuild TensorFlow with the appropriate compiler flags"):
        import tensorflow as tf

#: Public namespaces an expression may pass through or end at: ``tf``, ``tf.math``, ``tf.nn``, ``tf.linalg``
#: and ``tf.experimental.numpy`` (``tnp``), by attribute path; their module names (``tensorflow._api.v2.math``)
#: are read from the installed release.
NAMESPACES: tuple[str, ...] = ("", "math", "nn", "linalg", "experimental", "experimental.numpy")

#: Packages a resolved function or constant may come from (``tf.keras`` is Keras's: refused, see below).
ORIGINS = frozenset(("tensorflow",))

#: Modules a resolved object may be defined in: TensorFlow's ops (``tensorflow.python.ops.*``, which holds
#: ``tf.math``, ``tf.nn``, ``tf.linalg`` and the NumPy API), constants and dtypes. Everything else
#: (``tf.function``, ``tf.GradientTape``, ``tf.device``, ``tf.init_scope``, ``tf.Module``: the eager
#: runtime, graph building and state) is refused.
ALLOWED_ORIGINS: tuple[str, ...] = (
    "tensorflow.python.ops.", "tensorflow.python.framework.constant_op", "tensorflow.python.framework.dtypes",
    "tensorflow.python.framework.tensor_conversion",
)

#: Modules of ``tensorflow.python.ops`` whose objects are refused, module segment → why.
REFUSED_OPS: Mapping[str, str] = {
    **dict.fromkeys(("logging_ops", "gen_logging_ops"), "it prints or logs (tf.print)"),
    **dict.fromkeys(("script_ops", "gen_script_ops"),
                    "it calls back into Python (tf.py_function, tf.numpy_function)"),
    **dict.fromkeys(("variables", "variable_v1", "resource_variable_ops", "ref_variable", "variable_scope",
                     "state_ops", "gen_state_ops", "gen_resource_variable_ops"),
                    "it creates or assigns a variable (state that outlives one evaluation)"),
    **dict.fromkeys(("random_ops", "gen_random_ops", "stateless_random_ops", "gen_stateless_random_ops",
                     "stateful_random_ops", "random_ops_util", "random_crop_ops", "gen_stateful_random_ops",
                     "init_ops", "init_ops_v2"),
                    "it draws random numbers (a value that changes from run to run is no measurement)"),
    **dict.fromkeys(("io_ops", "gen_io_ops", "parsing_ops", "gen_parsing_ops", "lookup_ops", "data_flow_ops",
                     "gen_data_flow_ops", "session_ops", "summary_ops_v2", "gen_summary_ops", "batch_ops",
                     "critical_section_ops", "gen_checkpoint_ops", "checkpoint_ops"),
                    "it reads or writes files, queues, tables or summaries"),
    **dict.fromkeys(("custom_gradient", "gradients_impl", "gradients_util", "control_flow_v2_toggles"),
                    "it differentiates by itself or changes graph-building state"),
    "np_config": "it changes every tensor's behaviour globally (tnp.experimental_enable_numpy_behavior)",
    "candidate_sampling_ops": "it samples at random (tf.nn.*_candidate_sampler; the fixed unigram one reads a file)",
    "gen_experimental_dataset_ops": "it belongs to tf.data's runtime",
}


def _refusal(dotted: str, obj: Any) -> str | None:
    """Why a resolved name is refused (None when it is one of TensorFlow's pure ops)."""
    if isinstance(obj, (types.ModuleType, int, float, complex, bool)):
        return None
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str) or module == "builtins":
        module = type(obj).__module__
    if not module.startswith(ALLOWED_ORIGINS):
        return (f"{dotted!r} is refused: it comes from {module!r}, outside TensorFlow's ops, constants and dtypes "
                "(tf.function, tapes, devices, Keras and the runtime are out of reach)")
    for seg in module.split("."):
        if seg in REFUSED_OPS:
            return f"{dotted!r} is refused: {REFUSED_OPS[seg]}"
    return None


def load() -> TensorFlowAdapter:
    """The adapter, importing TensorFlow.

    Raises
    ------
    FrameworkUnavailable
        TensorFlow is not installed in this Python (one-line reason).
    """
    TensorFlowAdapter.imported()
    # every graph/jit cell traces a new tf.function of the same Python code: TensorFlow's retracing warning
    # would repeat for each of them
    tf.get_logger().setLevel(logging.ERROR)
    return TensorFlowAdapter()


def _lists(keys: Sequence[str], grads: Sequence[Any]) -> dict[str, Any]:
    """Gradients → input name → nested floats; ``tf.gather``'s sparse ``IndexedSlices`` are densified first."""
    return {k: tf.cast(tf.convert_to_tensor(g), tf.float64).numpy().tolist() for k, g in zip(keys, grads)}


class TensorFlowAdapter(Adapter):
    """The :class:`kinkcheck.frameworks.base.Adapter` for TensorFlow (eager execution, TensorFlow 2's default)."""

    name = "tensorflow"
    guard = GUARD

    def devices(self) -> list[str]:
        # tensorflow-cpu has no GPU kernels: list_physical_devices("GPU") is empty there
        return ["cpu", "cuda"] if tf.config.list_physical_devices("GPU") else ["cpu"]

    def device_name(self, device: str) -> str:
        """The GPU's name (``tf.config.experimental.get_device_details``), or the platform's processor for ``cpu``."""
        if device == "cuda":
            gpus = tf.config.list_physical_devices("GPU")
            if not gpus:
                raise DeviceAbsent("not measured: no CUDA device")
            return str(tf.config.experimental.get_device_details(gpus[0]).get("device_name", gpus[0].name))
        return processor_name()

    def settings(self) -> dict[str, str]:
        """Settings that affect the values, recorded in the shard's provenance: oneDNN's custom CPU ops (on by
        default on x86 Linux since TensorFlow 2.9; they may change float rounding), the float precision, and
        the NumPy and ml_dtypes releases beside TensorFlow (``tnp``'s type promotion of bfloat16 goes through
        them: it raises with NumPy 1.26 / ml_dtypes 0.4 and works with NumPy 2)."""
        from importlib.metadata import PackageNotFoundError, version  # slow to import

        def installed(dist: str) -> str:
            try:
                return version(dist)
            except PackageNotFoundError:
                return "not installed"

        return {"TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset (TensorFlow's default)"),
                "tf.config.experimental.enable_tensor_float_32_execution":
                    str(tf.config.experimental.tensor_float_32_execution_enabled()),
                "numpy": installed("numpy"), "ml_dtypes": installed("ml-dtypes")}

    def _modules(self) -> frozenset[str]:
        mods = set()
        for path in NAMESPACES:
            obj = tf
            for seg in filter(None, path.split(".")):
                obj = getattr(obj, seg, None)
            if obj is not None:
                mods.add(obj.__name__)
        return frozenset(mods)

    def _resolve(self, tree: ex.Node) -> dict[str, Any]:
        """Names → objects; a name outside TensorFlow's pure ops raises :class:`kinkcheck.language.expr.ExprError`."""
        names = resolve(tree, self.namespace(), self._modules(), ORIGINS)
        for dotted, obj in names.items():
            why = _refusal(dotted, obj)
            if why is not None:
                raise ex.ExprError(why)
        return names

    def _dtype(self, dtype: str) -> Any:
        check_dtype(dtype)
        return getattr(tf, dtype)

    def _device(self, device: str) -> str:
        if device == "cpu":
            return "/CPU:0"
        if device == "cuda":
            if not tf.config.list_physical_devices("GPU"):
                raise DeviceAbsent("not measured: no CUDA device")
            return "/GPU:0"
        raise ex.ExprError(f"unknown device {device!r} (known: cpu, cuda)")

    @staticmethod
    def _check_output(out: Any) -> Any:
        if not isinstance(out, tf.Tensor):
            raise ProgramError(f"program returned {type(out).__name__}, not a tf.Tensor")
        if not (out.dtype.is_floating or out.dtype.is_complex):
            raise ProgramError(f"program returned a {out.dtype.name} tensor, which has no gradient")
        return out

    def _inputs(self, at: Mapping[str, Any], dtype: str, ints: Sequence[str] = ()) -> list[Any]:
        """The point's tensors: ``ints`` as int64, the others of ``dtype`` (rounded to nearest from float64)."""
        tdtype = self._dtype(dtype)
        return [tf.constant(np.asarray(at[k], dtype=np.int64 if k in ints else np.float64),
                            dtype=tf.int64 if k in ints else tdtype) for k in at]

    def _run(self, tree: ex.Node, f: Any, at: Mapping[str, Any], dtype: str, device: str, mode: str,
             diff: tuple[str, ...], ints: tuple[str, ...]) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.gradient`; the result has the ``wrt`` inputs only.

        An input the output does not depend on, or reached only through ops without a gradient, gets zeros
        (``unconnected_gradients=ZERO``; TensorFlow's own default answer is ``None``).

        Raises
        ------
        kinkcheck.language.expr.ExprError
            Unknown mode, dtype or device; a refused name (``tf.print``, ``tf.py_function``, ``tf.Variable``,
            ``tf.random.*``, ``tf.function``, anything from Keras).
        Unavailable
            A name this release lacks.
        ProgramError
            The program's value is not a floating-point ``tf.Tensor``.
        """
        with tf.device(self._device(device)):
            return _modes(f, list(at), self._inputs(at, dtype, ints), diff, mode)

    def callable_gradient(
        self, fn: Any, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        """See :meth:`kinkcheck.frameworks.base.Adapter.callable_gradient`; ``mode`` is any of :attr:`modes`
        (graph and jit trace ``fn`` with ``tf.function``)."""
        check_mode(mode, self.modes)
        check_dtype(dtype)
        keys = list(at)
        with tf.device(self._device(device)):
            args = self._inputs(at, dtype)
            return _modes(lambda *a: returned(fn(*a), tf.Tensor, "a tf.Tensor"), keys, args, tuple(keys), mode)

    def _round_trip(self, dtype: str) -> Any:
        tdtype = self._dtype(dtype)
        return lambda v: tf.cast(tf.constant(np.asarray(v, dtype=np.float64), dtype=tdtype), tf.float64).numpy().tolist()


def _modes(f: Callable[..., Any], keys: Sequence[str], args: Sequence[Any], diff: Sequence[str],
           mode: str) -> dict[str, Any]:
    """The derivative of ``sum(f(*args))`` with respect to the ``diff`` inputs in ``mode``: name → nested floats."""
    pos = [keys.index(k) for k in diff]
    zero = tf.UnconnectedGradients.ZERO

    def reverse(*a: Any) -> list[Any]:
        with tf.GradientTape() as tape:
            tape.watch([a[i] for i in pos])
            out = f(*a)
        return tape.gradient(out, [a[i] for i in pos], unconnected_gradients=zero)

    if mode == "reverse":
        return _lists(diff, reverse(*args))
    if mode in ("graph", "jit"):
        traced = tf.function(reverse, jit_compile=mode == "jit", autograph=False)
        return _lists(diff, traced(*args))
    if mode == "second-order":
        wargs = [args[i] for i in pos]
        with tf.GradientTape() as outer:
            outer.watch(wargs)
            with tf.GradientTape() as inner:
                inner.watch(wargs)
                out = f(*args)
            grads = inner.gradient(out, wargs, unconnected_gradients=zero)
            total = tf.add_n([tf.reduce_sum(g) for g in grads])
        return _lists(diff, outer.gradient(total, wargs, unconnected_gradients=zero))
    # forward: one ForwardAccumulator per unit tangent of the differentiated inputs
    def along(k: int, idx: tuple[int, ...]) -> Any:
        primal = args[pos[k]]
        tangent = np.zeros(primal.shape, dtype=np.float64)
        tangent[idx] = 1
        with tf.autodiff.ForwardAccumulator(primal, tf.constant(tangent, dtype=primal.dtype)) as acc:
            total = tf.reduce_sum(f(*args))
        return tf.cast(acc.jvp(total, unconnected_gradients=zero), tf.float64)

    return by_unit_tangents([(k, tuple(args[i].shape)) for k, i in zip(diff, pos)], along)
