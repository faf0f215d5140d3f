"""JAX's hand-written baseline for ``python -m kinkcheck.dev.bench`` (:func:`kinkcheck.dev.bench.hand_written_loop`)."""

IMPORT = "import jax.numpy"

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
