"""Benchmark: ``python -m kinkcheck.bench`` (``nox -s bench``) prints, measured side by side in one run,

* the bare import time of each framework (``python -c "import torch"``),
* the time of ``kinkcheck probe`` over the whole catalog (float64 and float32, reverse mode, P0 networks),
* a minimal hand-written loop computing the same gradients: a plain script with one ``lambda`` per catalog
  program calling ``backward``/``jax.vjp`` directly (written to a temporary file from the catalog's
  canonical program text, as a person would type it; kinkcheck's parser is not involved),

and the ratio probe / (import + loop) against the target of 1.5. Every figure is wall time of a fresh
process, the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kinkcheck.catalog import load_catalog
from kinkcheck.oracles.backprop import P0

TARGET = 1.5

_TORCH_HEAD = """import torch
X, W1, W2, T = {net}
def grad(f, at, dtype):
    xs = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in at]
    try:
        y = f(*xs)
        y.backward(torch.ones_like(y))
        return [x.grad for x in xs]
    except Exception as e:
        return e
def net(f, dtype):
    w1 = torch.tensor(W1, dtype=dtype, requires_grad=True)
    w2 = torch.tensor(W2, dtype=dtype, requires_grad=True)
    try:
        loss = ((f(torch.tensor(X, dtype=dtype) @ w1) @ w2 - torch.tensor(T, dtype=dtype)) ** 2).sum()
        loss.backward()
        return w1.grad, w2.grad
    except Exception as e:
        return e
for dtype in (torch.float64, torch.float32):
"""

_JAX_HEAD = """import jax, jax.numpy as jnp
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


def hand_written_loop(framework: str) -> str:
    """The baseline script for ``framework``: one line per program, as a person would write it."""
    catalog = load_catalog()
    net = repr((P0.X.tolist(), P0.W1.tolist(), P0.W2.tolist(), P0.target.tolist()))
    lines = [(_TORCH_HEAD if framework == "torch" else _JAX_HEAD).format(net=net)]
    for case, program in catalog.programs(framework):
        args = ", ".join(case.inputs)
        at = repr([case.at[k] for k in case.inputs])
        lines.append(f"    grad(lambda {args}: {program.id}, {at}, dtype)\n")
        if case.activation and len(case.inputs) == 1:
            lines.append(f"    net(lambda {args}: {program.id}, dtype)\n")
    return "".join(lines)


def _best(cmd: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", action="append", choices=("torch", "jax"))
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    py = sys.executable
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fw in args.framework or ["torch", "jax"]:
            script = Path(tmp) / f"loop_{fw}.py"
            script.write_text(hand_written_loop(fw))
            imp = _best([py, "-c", f"import {fw}" + (".numpy" if fw == "jax" else "")], args.repeat)
            loop = _best([py, str(script)], args.repeat)
            probe = _best([py, "-m", "kinkcheck", "probe", "--framework", fw, "--quiet",
                           "--out", str(Path(tmp) / f"{fw}.json")], args.repeat)
            rows.append((fw, imp, loop, probe))
    print(f"{'framework':<10}{'import s':>10}{'hand loop s':>13}{'probe s':>10}{'probe/(import+loop)':>22}  target")
    for fw, imp, loop, probe in rows:
        ratio = probe / loop  # the loop script includes its own import
        print(f"{fw:<10}{imp:>10.2f}{loop - imp:>13.2f}{probe:>10.2f}{ratio:>22.2f}  <= {TARGET} "
              f"{'ok' if ratio <= TARGET else 'MISSED'}")
    print("(hand loop s = loop script wall time minus the bare import; each figure is the best of "
          f"{args.repeat} fresh processes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
