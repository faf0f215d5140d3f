"""The kink-hit census's reference network in JAX (``kinkcheck census --framework jax``): measurements 1 and 2 of
:mod:`kinkcheck.answers.hitcensus` under ``jax.jit``, on PyTorch's initialisations and minibatches
(:mod:`kinkcheck.frameworks.torch.hitcensus`, converted), so the two frameworks see the same networks and data.
Imports JAX only when it measures."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kinkcheck.frameworks.torch import hitcensus as reference
from kinkcheck.kinkhits import CensusCell, CensusScale

__all__ = ["JAX_CONVENTIONS", "bifurcation", "version"]


#: The conventions of measurement 2 in JAX: a ReLU'(0) value (a ``jax.custom_jvp``), or a JAX program.
JAX_CONVENTIONS: tuple[str, ...] = ("relu'(0)=0", "relu'(0)=0.5", "relu'(0)=1", "jax.nn.relu(x)",
                                    "jax.numpy.maximum(x, 0.0)", "jax.numpy.clip(x, 0.0)")


def _jax_activation(convention: str) -> Callable[[Any], Any]:
    import jax
    import jax.numpy as jnp

    if convention.startswith("relu'(0)="):
        s = float(convention.split("=", 1)[1])

        @jax.custom_jvp
        def relu(x: Any) -> Any:
            return jnp.maximum(x, jnp.zeros_like(x))

        @relu.defjvp
        def _jvp(primals: Any, tangents: Any) -> Any:
            (x,), (t,) = primals, tangents
            d = jnp.where(x > 0, 1.0, jnp.where(x == 0, s, 0.0)).astype(x.dtype)
            return relu(x), t * d

        return relu
    return {"jax.nn.relu(x)": jax.nn.relu, "jax.numpy.maximum(x, 0.0)": lambda x: jnp.maximum(x, 0.0),
            "jax.numpy.clip(x, 0.0)": lambda x: jnp.clip(x, 0.0)}[convention]


def bifurcation(scale: CensusScale, depth: int, dtype: str, X: Any, Y: Any,
                    progress: Callable[[], None] | None = None) -> CensusCell:
    """Measurements 1 and 2 in JAX (``jax.jit`` of the forward pass and of ``jax.grad``), on the same
    initialisations as :func:`kinkcheck.frameworks.torch.hitcensus.bifurcation` (PyTorch's, converted) and the same minibatches; float64 with
    ``jax_enable_x64`` on, as kinkcheck's JAX adapter does."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from kinkcheck.frameworks.jax.adapter import _x64  # slow: jax, numpy

    t0 = time.perf_counter()
    cell = CensusCell(dtype, depth, scale.inits, hits=[0] * depth, elements=[0] * depth,
                convention_differs={c: 0 for c in JAX_CONVENTIONS[1:]})
    with _x64(dtype == "float64"):
        dt = jnp.dtype(dtype)
        Xd = jnp.asarray(X.numpy(), dtype=dt)
        Yn = Y.numpy()

        def forward(params: Any, x: Any, act: Callable[[Any], Any]) -> tuple[Any, list[Any]]:
            hits, h = [], x
            for w, b in params[:-1]:
                z = h @ w.T + b
                hits.append(jnp.sum(z == 0))
                h = act(z)
            w, b = params[-1]
            return h @ w.T + b, hits

        def loss(params: Any, x: Any, y: Any, act: Callable[[Any], Any]) -> Any:
            logits = forward(params, x, act)[0].astype(jnp.float32)
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

        acts = {c: _jax_activation(c) for c in JAX_CONVENTIONS}
        count = jax.jit(lambda p, x: forward(p, x, acts[JAX_CONVENTIONS[0]])[1])
        grads = {c: jax.jit(lambda p, x, y, a=a: jax.grad(loss)(p, x, y, a)[0][0]) for c, a in acts.items()}
        for i in range(scale.inits):
            seed = scale.seed * 1_000_003 + i
            params = [(jnp.asarray(layer.weight.detach().double().numpy(), dtype=dt),
                       jnp.asarray(layer.bias.detach().double().numpy(), dtype=dt))
                      for layer in reference.mlp(depth, scale.width, "float64", seed)]
            found = False
            for idx in reference._minibatches(len(X), scale.batch, scale.passes, seed):
                x, y = Xd[idx.numpy()], jnp.asarray(Yn[idx.numpy()])
                if not cell.count_minibatch([int(h) for h in count(params, x)], x.shape[0], scale.width):
                    continue
                g0 = np.asarray(grads[JAX_CONVENTIONS[0]](params, x, y))
                found = cell.compare({c: not np.array_equal(g0, np.asarray(grads[c](params, x, y)))
                                      for c in JAX_CONVENTIONS[1:]}, found)
            if progress is not None:
                progress()
    cell.seconds = time.perf_counter() - t0
    return cell



def version() -> str:
    """The installed JAX's release."""
    import jax

    return str(jax.__version__)
