"""JAX's hand-written baseline for ``python -m kinkcheck.bench`` (:func:`kinkcheck.bench.hand_written_loop`).

:data:`HEAD` begins a plain script that computes the catalog's gradients with JAX directly, as a person
would type it: the imports, ``grad(f, at, dtype)``, ``net(f, dtype)`` (``{net}`` is P0's network) and the loop over
float64 and float32, to which the bench appends one line per catalog program; :data:`IMPORT` is the bare import
timed beside it. Text only: this module imports nothing of jax.
"""

IMPORT = 'import jax.numpy'

HEAD = """import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
X, W1, W2, T = {net}
def grad(f, at, dtype):
    xs = [jnp.asarray(v, dtype=dtype) for v in at]
    try:
        y, vjp = jax.vjp(f, *xs)
        return vjp(jnp.ones_like(y))
    except Exception as e:
        return e
def net(f, dtype):
    x, t = jnp.asarray(X, dtype=dtype), jnp.asarray(T, dtype=dtype)
    loss = lambda w1, w2: ((f(x @ w1) @ w2 - t) ** 2).sum()
    try:
        return jax.grad(loss, argnums=(0, 1))(jnp.asarray(W1, dtype=dtype), jnp.asarray(W2, dtype=dtype))
    except Exception as e:
        return e
for dtype in (jnp.float64, jnp.float32):
"""
