"""PyTorch adapter: evaluates call expressions with ``torch`` tensors.

Reverse mode is ``y.backward(torch.ones_like(y))`` (the VJP with ones, what ``y.sum().backward()`` gives);
forward mode is ``torch.func.jvp`` along each input component's unit tangent, with the output summed.
Where PyTorch defines a kink's derivative: ``tools/autograd/derivatives.yaml`` (e.g. ``clamp``,
``maximum``, ``abs``) and ``torch/csrc/autograd/FunctionsManual.cpp``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kinkcheck import expr as ex
from kinkcheck.frameworks.base import (
    FrameworkUnavailable,
    ProgramError,
    Unavailable,
    check_dtype,
    check_mode,
    resolve,
    unit_tangents,
)

try:
    import torch
except ImportError as _err:  # pragma: no cover - depends on the environment
    torch = None
    _IMPORT_ERROR = str(_err)


#: Modules an expression may reach; everything else a framework module re-exports (os, sys, builtins,
#: serialization) is out of reach. See kinkcheck.expr.resolve_names.
MODULES = frozenset(("torch", "torch.nn", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft"))
#: Packages a resolved function or constant may come from.
ORIGINS = frozenset(("torch",))


def load() -> TorchAdapter:
    if torch is None:
        raise FrameworkUnavailable(f"torch is not installed in this Python ({_IMPORT_ERROR})")
    return TorchAdapter()


class TorchAdapter:
    """The :class:`kinkcheck.frameworks.base.Adapter` for PyTorch."""

    name = "torch"

    @property
    def version(self) -> str:
        return str(torch.__version__)

    def devices(self) -> list[str]:
        return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]

    def settings(self) -> dict[str, str]:
        """Framework settings that affect the values, recorded in the shard's provenance."""
        return {}

    def namespace(self) -> dict[str, Any]:
        return {"torch": torch}

    def _dtype(self, dtype: str) -> Any:
        check_dtype(dtype)
        return getattr(torch, dtype)

    def _device(self, device: str) -> Any:
        if device == "cuda" and not torch.cuda.is_available():
            raise FrameworkUnavailable("not measured: no CUDA device")
        if device not in ("cpu", "cuda"):
            raise ex.ExprError(f"unknown device {device!r} (known: cpu, cuda)")
        return torch.device(device)

    def _resolve(self, tree: ex.Node) -> dict[str, Any]:
        return resolve(tree, self.namespace(), MODULES, ORIGINS)

    @staticmethod
    def _check_output(out: Any) -> Any:
        if not isinstance(out, torch.Tensor):
            raise ProgramError(f"program returned {type(out).__name__}, not a tensor")
        if not (out.is_floating_point() or out.is_complex()):
            raise ProgramError(f"program returned a {out.dtype} tensor, which has no gradient")
        return out

    def gradient(
        self, tree: ex.Node, at: Mapping[str, Any], dtype: str = "float64", device: str = "cpu", mode: str = "reverse"
    ) -> dict[str, Any]:
        check_mode(mode)
        tdtype, tdev = self._dtype(dtype), self._device(device)
        names = self._resolve(tree)
        keys = list(at)
        base = [torch.tensor(at[k], dtype=tdtype, device=tdev) for k in keys]
        if mode == "reverse":
            leaves = [b.clone().requires_grad_(True) for b in base]
            out = self._check_output(ex.evaluate(tree, names, dict(zip(keys, leaves))))
            out.backward(torch.ones_like(out))
            grads = [lf.grad if lf.grad is not None else torch.zeros_like(lf) for lf in leaves]
            # clone(): some backward formulas (torch.sgn) return a storage-less "zero tensor".
            return {k: g.detach().to("cpu", torch.float64).clone().tolist() for k, g in zip(keys, grads)}
        func = getattr(torch, "func", None)
        if func is None or not hasattr(func, "jvp"):
            raise Unavailable(f"torch.func.jvp does not exist in torch {torch.__version__}")

        def f(*args: Any) -> Any:
            return self._check_output(ex.evaluate(tree, names, dict(zip(keys, args)))).sum()

        result = {k: torch.zeros_like(b, dtype=torch.float64, device="cpu") for k, b in zip(keys, base)}
        for name, idx in unit_tangents([(k, tuple(b.shape)) for k, b in zip(keys, base)]):
            tangents = [torch.zeros_like(b) for b in base]
            tangents[keys.index(name)][idx] = 1
            _, jvp = func.jvp(f, tuple(base), tuple(tangents))
            result[name][idx] = jvp.detach().to("cpu", torch.float64)
        return {k: v.tolist() for k, v in result.items()}

    def network_grads(
        self, tree: ex.Node, input_name: str, net: Any, dtype: str = "float32", device: str = "cpu"
    ) -> tuple[list[list[float]], list[list[float]]]:
        tdtype, tdev = self._dtype(dtype), self._device(device)
        names = self._resolve(tree)
        X = torch.tensor(net.X, dtype=tdtype, device=tdev)
        W1 = torch.tensor(net.W1, dtype=tdtype, device=tdev, requires_grad=True)
        W2 = torch.tensor(net.W2, dtype=tdtype, device=tdev, requires_grad=True)
        T = torch.tensor(net.target, dtype=tdtype, device=tdev)
        H = self._check_output(ex.evaluate(tree, names, {input_name: X @ W1}))
        loss = ((H @ W2 - T) ** 2).sum()
        loss.backward()
        return (
            W1.grad.detach().to("cpu", torch.float64).clone().tolist(),
            W2.grad.detach().to("cpu", torch.float64).clone().tolist(),
        )
