"""JAX's registry record: standard library only (:func:`kinkcheck.registry.read_record`)."""

from __future__ import annotations

from kinkcheck.registry import Framework, version_tuple


def requirements(version: str) -> list[str]:
    reqs = [f"jax=={version}", f"jaxlib=={version}"]
    if version_tuple(version) < (0, 4, 26):
        reqs += ["numpy<2", "scipy<1.13"]
    return reqs


def cuda_requirements(version: str) -> list[str] | None:
    # jax[cuda12] (the jax-cuda12-plugin and -pjrt wheels, CUDA libraries from PyPI) from 0.4.26; before it the
    # CUDA jaxlib came from Google's own find-links page, not a package registry: not measured there.
    if version_tuple(version) < (0, 4, 26):
        return None
    return [f"jax[cuda12]=={version}", *requirements(version)[1:]]


RULE = (
    "no framework-wide rule; documented choices: jax.nn.relu'(0) = 0 and jax.nn.relu6'(0) = relu6'(6) = 0; "
    "lax.max/lax.min (jnp.maximum, jnp.minimum, jnp.clip) and the reductions jnp.max/jnp.min share the "
    "derivative evenly among tied arguments; elsewhere at a kink the value is left open",
    "jax/_src/nn/functions.py (relu, relu6 docstrings); jax/_src/lax/lax.py (_balanced_eq in the max_p/min_p "
    "JVPs, _reduce_chooser_jvp_rule)",
)
DOCUMENTED = {
    **dict.fromkeys(("jax.nn.relu", "jax.nn.relu6"), "zero"),
    **dict.fromkeys(("jax.numpy.maximum", "jax.numpy.minimum", "jax.numpy.clip", "jax.lax.max", "jax.lax.min",
                     "jax.numpy.max", "jax.numpy.min", "jax.numpy.amax", "jax.numpy.amin", ".max", ".min"), "even"),
}


RECORD = Framework(
    "jax", "JAX", "jax", "kinkcheck.frameworks.jax",
    ("reverse", "jit", "forward", "jacfwd", "jacrev", "vmap", "second-order"), ("s", "#1f77b4"),
    aliases={"jnp": "jax.numpy", "lax": "jax.lax"}, devices=("cpu", "cuda"),
    # 0.4.13, 0.4.20, 0.4.26, 0.4.30, 0.4.38 and the newest patch of every minor line from 0.5
    requirements=requirements, device_requirements={"cuda": cuda_requirements},
    # jaxlib: cp312 from 0.4.17, cp313 from 0.4.34, cp314 from 0.8
    max_python={"0.4.13": (3, 11), "0.4.20": (3, 12), "0.4.26": (3, 12), "0.4.30": (3, 12), "0.4.38": (3, 13),
                "0.5.3": (3, 13), "0.6.2": (3, 13), "0.7.2": (3, 13)},
    min_python={"0.11.2": (3, 12), "0.12.0.1": (3, 12)},  # Requires-Python >= 3.12 (jax and jaxlib)
    tested="0.10.2", rule=RULE, documented=DOCUMENTED,
)
