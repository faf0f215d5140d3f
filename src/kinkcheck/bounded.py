"""Bounded evaluation: ``kinkcheck grad`` and ``kinkcheck check`` run their evaluation in a worker process.

An expression or a user's function can loop forever (``jax.lax.while_loop(jax.numpy.isfinite,
jax.numpy.abs, x)`` at 0) or allocate without limit (``torch.ones(100000, 100000)``: 40 GB). Each evaluation
therefore runs in a fresh ``python -m kinkcheck.bounded`` process:

* memory: the worker sets ``RLIMIT_DATA`` on itself before importing a framework (Linux counts every
  private writable mapping, so ``malloc``/``mmap`` past the limit fail with ``ENOMEM``, which PyTorch and
  XLA report as an error). ``RLIMIT_AS`` would also count address space that is reserved but never used
  (CUDA reserves tens of GiB of it), so it is not used;
* time: the parent waits at most the timeout, then kills the worker's whole process group (compile
  workers included);
* a fresh process also means that nothing one evaluation changes (a default dtype, a seed) reaches the next.

Past a bound the command prints one line (``exceeded 120 s``, ``exceeded the memory limit of 8 GiB``) and
exits 2. Limits: ``--timeout``/``--memory`` options, else the ``KINKCHECK_TIMEOUT`` (seconds) and
``KINKCHECK_MEMORY_GIB`` environment variables, else :data:`DEFAULT_TIMEOUT_S` and
:data:`DEFAULT_MEMORY_GIB`. The parent never imports a framework, so a bounded ``grad`` costs one Python
start-up more than an in-process one (0.1-0.4 s measured on 2 cores; the framework import, 1-3 s,
happens once either way).

Protocol: the parent writes ``{"task", "payload", "memory_bytes"}`` as JSON on the worker's stdin; the
worker answers ``{"ok": result}`` or ``{"error": one-line message}`` on its original stdout, while anything
else printed there (a user's function may print) goes to stderr, which the parent passes on.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_MEMORY_GIB",
    "DEFAULT_TIMEOUT_S",
    "ENV_MEMORY",
    "ENV_TIMEOUT",
    "BoundExceeded",
    "Limits",
    "TaskError",
    "kill_group",
    "limit_memory",
    "run",
    "run_inline",
]

#: Wall-clock seconds one evaluation may take (a compiled mode's first call takes up to ~30 s on 2 cores).
DEFAULT_TIMEOUT_S = 120.0
#: Memory one evaluation may use, GiB (torch or jax with a small program use ~0.3 GiB).
DEFAULT_MEMORY_GIB = 8.0
ENV_TIMEOUT = "KINKCHECK_TIMEOUT"
ENV_MEMORY = "KINKCHECK_MEMORY_GIB"

#: Messages of allocation failures under the limit: PyTorch's CPU allocator, XLA, the C++ runtime.
_OOM_MARKERS = ("can't allocate memory", "cannot allocate memory", "resource_exhausted", "out of memory",
                "bad_alloc", "failed to allocate")


class TaskError(Exception):
    """Bad input found while evaluating (an unknown name, a program that raised): one line, exit 2."""


class BoundExceeded(TaskError):
    """The evaluation ran past its time or memory limit, or its worker died: one line, exit 2."""


@dataclass(frozen=True)
class Limits:
    """Time (seconds) and memory (GiB) bounds of one evaluation."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_gib: float = DEFAULT_MEMORY_GIB

    @classmethod
    def resolve(cls, timeout: str | float | None = None, memory: str | float | None = None,
                environ: Mapping[str, str] | None = None) -> Limits:
        """Option values, else the environment variables, else the defaults.

        Raises
        ------
        ValueError
            A value that is not a positive finite number (one-line reason naming where it came from).
        """
        env = os.environ if environ is None else environ
        return cls(_positive(timeout, ENV_TIMEOUT, "--timeout", env, DEFAULT_TIMEOUT_S),
                   _positive(memory, ENV_MEMORY, "--memory", env, DEFAULT_MEMORY_GIB, "GiB"))

    def time_message(self) -> str:
        return f"the evaluation exceeded {self.timeout_s:g} s (change the limit with --timeout or {ENV_TIMEOUT})"

    def memory_message(self) -> str:
        return (f"the evaluation exceeded the memory limit of {self.memory_gib:g} GiB "
                f"(change it with --memory or {ENV_MEMORY})")


def _positive(value: str | float | None, env_name: str, option: str, env: Mapping[str, str],
              default: float, unit: str = "s") -> float:
    """A positive limit from ``option``'s value, else ``env_name``, else ``default``; ``unit`` ``"s"`` (at most
    a day) or ``"GiB"`` (at least :data:`MIN_MEMORY_GIB`: below it not even a framework imports)."""
    where = option
    if value is None:
        value, where = env.get(env_name), env_name
    if value is None or value == "":
        return default
    try:
        out = float(value)
    except (TypeError, ValueError):
        out = math.nan
    least = MIN_MEMORY_GIB if unit == "GiB" else 0.0
    if not (math.isfinite(out) and least <= out <= MAX_LIMIT and out > 0):
        bounds = (f"{least:g} – {MAX_LIMIT:g} GiB: less and not even a framework imports" if unit == "GiB"
                  else f"seconds, at most {MAX_LIMIT:g}")
        raise ValueError(f"{where} must be a positive number, got {ascii(value) if isinstance(value, str) else value}"
                         f" ({bounds})")
    return out


#: Smallest memory limit accepted (GiB): importing NumPy alone maps more than a few hundred MiB.
MIN_MEMORY_GIB = 0.5
#: Largest time (s) or memory (GiB) limit accepted: a day, or 84 TiB; past that a limit means nothing
#: (and a byte count past 2**63 would not fit the operating system's limit).
MAX_LIMIT = 86_400.0


def _is_oom(err: BaseException) -> bool:
    if isinstance(err, MemoryError):
        return True
    text = str(err).lower()
    return any(m in text for m in _OOM_MARKERS)


# -- tasks: run in the worker (or in-process with run_inline) -----------------------------------------------

def _grad_task(payload: Mapping[str, Any], limits: Limits) -> Any:
    """``kinkcheck grad``'s evaluation: payload ``expr``, ``at``, ``framework``, ``dtype``, ``device``, ``mode``,
    and optionally ``wrt`` (differentiated input names; absent or None: all but ``ints``) and ``ints`` (names
    of integer inputs), as in :class:`kinkcheck.expr.Inputs`. ``at`` may hold inf/nan (JSON's Infinity/NaN).

    Returns input name → encoded gradient, for the differentiated inputs only.
    """
    from kinkcheck import expr as ex
    from kinkcheck.catalog import FRAMEWORKS
    from kinkcheck.frameworks import FrameworkUnavailable, Unavailable, get_adapter
    from kinkcheck.frameworks.base import short_error
    from kinkcheck.vocabulary import encode

    framework = payload["framework"]
    try:
        tree = ex.parse(payload["expr"], payload["at"], FRAMEWORKS)
        adapter = get_adapter(framework)
        grad = adapter.gradient(tree, payload["at"], payload["dtype"], payload["device"], payload["mode"],
                                wrt=payload.get("wrt"), ints=tuple(payload.get("ints") or ()))
    except (FrameworkUnavailable, Unavailable, ex.ExprError) as err:
        raise TaskError(str(err)) from None
    except Exception as err:  # noqa: BLE001 - the program itself failed: report it, one line
        if _is_oom(err):
            raise BoundExceeded(f"{limits.memory_message()}: {framework} raised {short_error(err, 120)}") from None
        raise TaskError(f"{framework} raised {short_error(err)}") from None
    return {k: encode(v) for k, v in grad.items()}


def _check_task(payload: Mapping[str, Any], limits: Limits) -> Any:
    """``kinkcheck check``'s evaluation: payload ``first``, ``second``, ``at``, ``frameworks``, ``dtype``, and
    optionally ``modes`` (one per function; default reverse)."""
    from kinkcheck import expr as ex
    from kinkcheck.check import CheckError, check_pair, load_function
    from kinkcheck.frameworks import FrameworkUnavailable

    try:
        fns = [load_function(payload["first"]), load_function(payload["second"])]
        result = check_pair(fns[0], fns[1], payload["at"], frameworks=tuple(payload["frameworks"]),
                            dtype=payload["dtype"], mode=tuple(payload.get("modes") or ("reverse", "reverse")))
    except (ex.ExprError, CheckError, FrameworkUnavailable) as err:
        if _is_oom(err):
            raise BoundExceeded(f"{limits.memory_message()}: {err}") from None
        raise TaskError(str(err)) from None
    # by hand: dataclasses.asdict deep-copies every nested list (seconds for 400 points of 1,500 entries)
    return {"frameworks": list(result.frameworks), "dtype": result.dtype, "not_tried": result.not_tried,
            "modes": list(result.modes),
            "points": [{"at": p.at, "why": p.why, "changed": p.changed, "grads": p.grads, "differs": p.differs,
                        "seen": p.seen, "kinks": p.kinks} for p in result.points]}


TASKS: dict[str, Callable[[Mapping[str, Any], Limits], Any]] = {"grad": _grad_task, "check": _check_task}


def run_inline(task: str, payload: Mapping[str, Any], limits: Limits | None = None) -> Any:
    """Run a task in this process, unbounded (``--no-isolate``); same result and errors as :func:`run`."""
    return TASKS[task](payload, limits or Limits())


def run(task: str, payload: Mapping[str, Any], limits: Limits) -> Any:
    """Run a task (``"grad"`` or ``"check"``) in a worker process within ``limits``.

    Parameters
    ----------
    payload : mapping
        JSON-ready arguments of the task (see ``_grad_task``, ``_check_task``).

    Returns
    -------
    object
        The task's JSON-ready result (``grad``: input name → encoded gradient; ``check``: a
        :class:`kinkcheck.check.CheckResult` as a dict).

    Raises
    ------
    TaskError
        The task refused its input or the program failed (the worker's one-line message).
    BoundExceeded
        The worker ran past ``limits.timeout_s``, past the memory limit, or died (killed by a signal).
    """
    request = json.dumps({"task": task, "payload": payload, "memory_bytes": int(limits.memory_gib * 2 ** 30),
                          "memory_gib": limits.memory_gib}).encode()
    import kinkcheck

    env = dict(os.environ)  # the worker imports this very kinkcheck, even one found through a changed sys.path
    src = str(Path(kinkcheck.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen([sys.executable, "-m", "kinkcheck.bounded"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env)
    try:
        out, err = proc.communicate(request, timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.communicate()
        raise BoundExceeded(limits.time_message()) from None
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C): take the worker down too
            kill_group(proc)
            proc.wait()
    text = err.decode("utf-8", "replace")
    try:
        answer = json.loads(out)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and ("ok" in answer or isinstance(answer.get("error"), str)):
        if "ok" in answer:
            sys.stderr.write(text)  # the worker's warnings, as an in-process run would show them
            return answer["ok"]
        # an error is one line: the framework's warnings on the way there would bury it
        raise (BoundExceeded if answer.get("bound") else TaskError)(answer["error"])
    # the worker died without answering: one line, with the last thing it said
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = f": {lines[-1][:200]}" if lines else ""
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:  # a real-time signal without a name
            name = f"signal {-proc.returncode}"
        raise BoundExceeded(f"the evaluation was killed by {name}{said} (its memory limit is {limits.memory_gib:g} "
                            f"GiB; change it with --memory or {ENV_MEMORY})")
    raise TaskError(f"the evaluation failed (exit status {proc.returncode}){said or ': no message'}")


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a worker started with ``start_new_session=True`` and every process it started (compile workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (AttributeError, ProcessLookupError, PermissionError):  # AttributeError: Windows has no killpg
        proc.kill()


def limit_memory(limit: int) -> None:
    """Cap this process's data segment (``RLIMIT_DATA``) at ``limit`` bytes; call before importing a framework.

    Allocations past it fail (``MemoryError``, PyTorch's "can't allocate memory", XLA's RESOURCE_EXHAUSTED).
    A no-op where the ``resource`` module does not exist (Windows).
    """
    try:
        import resource
    except ImportError:  # Windows: no rlimit; the time bound still holds
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def _worker() -> int:
    """The worker's side of :func:`run` (``python -m kinkcheck.bounded``)."""
    request = json.loads(sys.stdin.buffer.read())
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints (a user's function, a framework's C++ code) go to stderr, not into the answer
    limits = Limits(memory_gib=float(request["memory_gib"]))
    limit_memory(int(request["memory_bytes"]))
    try:
        answer: dict[str, Any] = {"ok": TASKS[request["task"]](request["payload"], limits)}
    except BoundExceeded as err:
        answer = {"error": str(err), "bound": True}
    except TaskError as err:
        answer = {"error": str(err)}
    except MemoryError:
        answer = {"error": limits.memory_message(), "bound": True}
    with os.fdopen(answer_fd, "w", encoding="utf-8") as f:
        json.dump(answer, f)
    return 0


if __name__ == "__main__":
    sys.exit(_worker())
