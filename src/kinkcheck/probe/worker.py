"""Worker processes, one protocol: every evaluation that may crash, hang or allocate without limit runs in a
process of its own, under a time and a memory limit.

**Bounded evaluation.** ``kinkcheck grad`` and ``kinkcheck check`` run their evaluation in a worker process.

An expression or a user's function can loop forever (``jax.lax.while_loop(jax.numpy.isfinite,
jax.numpy.abs, x)`` at 0) or allocate without limit (``torch.ones(100000, 100000)``: 40 GB). Each evaluation
therefore runs in a fresh ``python -m kinkcheck.probe.worker`` process:

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


Protocol: the parent writes ``{"task", "payload", "memory_bytes", "memory_gib"}`` as JSON on the worker's stdin; the
worker answers ``{"ok": result}`` or ``{"error": one-line message}`` on its original stdout, while anything
else printed there (a user's function may print) goes to stderr, which the parent passes on.

**The probe's workers** (:func:`kinkcheck.probe.isolated.probe_isolated`) use the same limits and the same
process-group kill (:func:`kill_group`, :func:`limit_memory`); they are forked from the probe where that is safe
(:class:`ForkedWorker`, :func:`fork_safe`), die with it (:func:`die_with_parent`), and report through the
journal (:mod:`kinkcheck.probe.journal`) instead of a pipe, so that a crash loses one case, not the shard:
:class:`ProbeLimits` bounds each case and compiled batch.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import importlib
import json
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kinkcheck
from kinkcheck.registry import FRAMEWORKS

__all__ = [
    "DEFAULT_MEMORY_GIB",
    "DEFAULT_TIMEOUT_S",
    "ENV_MEMORY",
    "ENV_TIMEOUT",
    "BoundExceeded",
    "ForkedWorker",
    "Limits",
    "ProbeInterrupted",
    "ProbeLimits",
    "TaskError",
    "die_with_parent",
    "fork_safe",
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


class NoDevice(TaskError):
    """The evaluation asked for a device this machine lacks (:class:`kinkcheck.frameworks.DeviceAbsent`): a face
    may answer from the report's cells of that device instead."""


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
        bounds = (f"GiB from {least:g} to {MAX_LIMIT:g} (less and not even a framework imports)" if unit == "GiB"
                  else f"seconds above 0, at most {MAX_LIMIT:g}")
        raise ValueError(f"{where} must be a number of {bounds}, got {ascii(value) if isinstance(value, str) else value}")
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


#: The tasks a worker runs, by name: ``module:function`` of the face that defines it, each called with the JSON
#: payload and the :class:`Limits` and returning a JSON-ready result (raising :class:`TaskError` or
#: :class:`BoundExceeded`). Named, not imported: the worker sits below the faces it serves.
TASKS: dict[str, str] = {"grad": "kinkcheck.probe.cells:grad_task", "check": "kinkcheck.answers.check:check_task"}


def _task(name: str) -> Callable[[Mapping[str, Any], Limits], Any]:
    module, _, function = TASKS[name].partition(":")
    return getattr(importlib.import_module(module), function)


def run_inline(task: str, payload: Mapping[str, Any], limits: Limits | None = None) -> Any:
    """Run a task in this process, unbounded (``--no-isolate``); same result and errors as :func:`run`."""
    return _task(task)(payload, limits or Limits())


def run(task: str, payload: Mapping[str, Any], limits: Limits) -> Any:
    """Run a task (``"grad"`` or ``"check"``) in a worker process within ``limits``.

    Parameters
    ----------
    payload : mapping
        JSON-ready arguments of the task (see :data:`TASKS`).

    Returns
    -------
    object
        The task's JSON-ready result (``grad``: input name → encoded gradient; ``check``: a
        :class:`kinkcheck.answers.check.CheckResult` as a dict).

    Raises
    ------
    TaskError
        The task refused its input or the program failed (the worker's one-line message).
    BoundExceeded
        The worker ran past ``limits.timeout_s``, past the memory limit, or died (killed by a signal).
    """
    request = json.dumps({"task": task, "payload": payload, "memory_bytes": int(limits.memory_gib * 2 ** 30),
                          "memory_gib": limits.memory_gib}).encode()

    env = dict(os.environ)  # the worker imports this very kinkcheck, even one found through a changed sys.path
    src = str(Path(kinkcheck.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen([sys.executable, "-m", "kinkcheck.probe.worker"], stdin=subprocess.PIPE,
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
        raise (BoundExceeded if answer.get("bound") else NoDevice if answer.get("no_device") else TaskError)(
            answer["error"])
    # the worker died without answering: one line, with the last thing it said
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = f": {lines[-1][:200]}" if lines else ""
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:  # a real-time signal without a name
            name = f"signal {-proc.returncode}"
        if -proc.returncode in _CRASHES:  # the native code faulted: no limit was reached
            raise BoundExceeded(f"the evaluation crashed with {name} (a fault in a framework's native code or the "
                                f"function's){said}")
        raise BoundExceeded(f"the evaluation was killed by {name}{said} (its memory limit is {limits.memory_gib:g} "
                            f"GiB; change it with --memory or {ENV_MEMORY})")
    raise TaskError(f"the evaluation failed (exit status {proc.returncode}){said or ': no message'}")


#: Signals of a process that faulted (a segmentation fault, a bus error, an illegal instruction, an arithmetic trap),
#: not one stopped for its limits: SIGKILL (the kernel's out-of-memory killer) and SIGABRT (a failed allocation
#: aborts native code) may be the memory limit.
_CRASHES = frozenset(int(getattr(signal, s)) for s in ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE") if hasattr(signal, s))


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
        import resource  # optional: not on Windows
    except ImportError:  # Windows: no rlimit; the time bound still holds
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def _worker() -> int:
    """The worker's side of :func:`run` (``python -m kinkcheck.probe.worker``): a request on stdin, the answer on
    stdout. Not a command for people: anything but :func:`run`'s request is one line on stderr and exit 2."""
    try:
        request = json.loads(sys.stdin.buffer.read())
        name, payload = request["task"], request["payload"]
        TASKS[name]  # noqa: B018  (a KeyError names a task that does not exist)
        limits = Limits(memory_gib=float(request["memory_gib"]))
        memory_bytes = int(request["memory_bytes"])
    except (ValueError, TypeError, KeyError) as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        print("python -m kinkcheck.probe.worker: not a request of kinkcheck.probe.worker.run (it reads one JSON "
              f"object on stdin: task, payload, memory_gib, memory_bytes): {type(err).__name__}: {err}",
              file=sys.stderr)
        return 2
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints (a user's function, a framework's C++ code) go to stderr, not into the answer
    limit_memory(memory_bytes)
    task = _task(name)  # imported here: what an import prints goes to stderr
    try:
        answer: dict[str, Any] = {"ok": task(payload, limits)}
    except BoundExceeded as err:
        answer = {"error": str(err), "bound": True}
    except NoDevice as err:
        answer = {"error": str(err), "no_device": True}
    except TaskError as err:
        answer = {"error": str(err)}
    except MemoryError:
        answer = {"error": limits.memory_message(), "bound": True}
    with os.fdopen(answer_fd, "w", encoding="utf-8") as f:
        json.dump(answer, f)
    return 0


#: Seconds an isolated probe waits for a case's eager cells before killing its worker (a case took at most
#: 22 s in every mode and dtype, jax 0.10.2 on 2 busy cores).
DEFAULT_CASE_TIMEOUT_S = 600.0


#: Seconds for one compiled batch (the whole catalog in one mode and dtype; inductor took ~290 s cold on 2 cores).
DEFAULT_BATCH_TIMEOUT_S = 3600.0


#: Memory of the probe worker, GiB (``RLIMIT_DATA``, see :func:`limit_memory`; a whole probe peaked at
#: 3.7 GiB with jax 0.10.2, 0.5 GiB with torch 2.13.0).
DEFAULT_PROBE_MEMORY_GIB = 16.0


#: Least seconds a probe worker gets to import its framework (seconds; much more on a loaded machine).
STARTUP_TIMEOUT_S = 300.0


ENV_CASE_TIMEOUT = "KINKCHECK_CASE_TIMEOUT"


ENV_BATCH_TIMEOUT = "KINKCHECK_BATCH_TIMEOUT"


ENV_PROBE_MEMORY = "KINKCHECK_PROBE_MEMORY_GIB"


@dataclasses.dataclass(frozen=True)
class ProbeLimits:
    """Bounds of an isolated probe: seconds without progress per case and per compiled batch, worker memory (GiB).

    The time limits count from the worker's last journal line, so they bound one case (or batch), not the
    probe; the worker's start-up (the framework import) gets the largest of them and :data:`STARTUP_TIMEOUT_S`.
    """

    case_timeout_s: float = DEFAULT_CASE_TIMEOUT_S
    batch_timeout_s: float = DEFAULT_BATCH_TIMEOUT_S
    memory_gib: float = DEFAULT_PROBE_MEMORY_GIB

    @classmethod
    def resolve(cls, case_timeout: str | float | None = None, batch_timeout: str | float | None = None,
                memory: str | float | None = None, environ: Any = None) -> ProbeLimits:
        """Option values, else ``KINKCHECK_CASE_TIMEOUT``/``KINKCHECK_BATCH_TIMEOUT``/``KINKCHECK_PROBE_MEMORY_GIB``,
        else the defaults.

        Raises
        ------
        ValueError
            A value that is not a positive finite number (one line naming the option or variable).
        """
        env = os.environ if environ is None else environ
        return cls(_positive(case_timeout, ENV_CASE_TIMEOUT, "--case-timeout", env, DEFAULT_CASE_TIMEOUT_S),
                   _positive(batch_timeout, ENV_BATCH_TIMEOUT, "--batch-timeout", env, DEFAULT_BATCH_TIMEOUT_S),
                   _positive(memory, ENV_PROBE_MEMORY, "--memory", env, DEFAULT_PROBE_MEMORY_GIB, "GiB"))

    def limit_for(self, key: str) -> float:
        """Seconds the case or compiled batch (``batch:…``) ``key`` may run."""
        return self.batch_timeout_s if key.startswith("batch:") else self.case_timeout_s

    def time_message(self, key: str) -> str:
        if key.startswith("batch:"):
            return (f"exceeded the compiled-batch time limit of {self.batch_timeout_s:g} s "
                    f"(change it with --batch-timeout or {ENV_BATCH_TIMEOUT})")
        return (f"exceeded the per-case time limit of {self.case_timeout_s:g} s "
                f"(change it with --case-timeout or {ENV_CASE_TIMEOUT})")


class ProbeInterrupted(RuntimeError):
    """The probe worker was killed by a signal the probe did not send (a person, the OOM killer): the probe
    stops, its journal kept for the next run to resume; ``str(err)`` is one line."""


#: Signals that end a worker from outside: an interruption of the probe, not a crash of the case it probes.
INTERRUPTING_SIGNALS = ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP")


def _interrupting_signal(rc: int | None) -> str | None:
    """The name of the signal in :data:`INTERRUPTING_SIGNALS` that ended a worker with status ``rc``, else None.

    A worker that gets SIGINT as a Python exception exits with 130 (``kinkcheck.cli.main``).
    """
    if rc == 130:
        return "SIGINT"
    if rc is None or rc >= 0:
        return None
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        return None
    return name if name in INTERRUPTING_SIGNALS else None


#: Environment variable: ``spawn`` starts every probe worker as a new interpreter, even where one could be forked.
START_ENV = "KINKCHECK_PROBE_START"


def fork_safe() -> bool:
    """Whether a probe worker may be forked from this process instead of started as a new interpreter.

    Only on Linux (macOS's system libraries do not survive a fork without exec), only while this process runs
    one thread, and only while no framework of the registry is imported here: a framework's thread pools, XLA
    client or device context are not usable in a forked child (JAX warns that fork deadlocks it), and a
    worker must import its framework fresh, as a new interpreter would. ``KINKCHECK_PROBE_START=spawn``
    turns forking off.
    """
    if not sys.platform.startswith("linux") or not hasattr(os, "fork") or os.environ.get(START_ENV) == "spawn":
        return False
    if threading.active_count() != 1:
        return False
    return not any(f in sys.modules for f in FRAMEWORKS)  # a framework's name is its import root


class ForkedWorker:
    """A probe worker forked from this process: the part of :class:`subprocess.Popen` that
    :func:`kinkcheck.probe.isolated._watch`, :func:`kill_group` and the restart loop use (``pid``, ``poll``,
    ``wait``, ``kill``, ``returncode``: negative for a signal, as ``Popen`` says it).

    The child leads its own session (``start_new_session``), sets ``env`` in its environment, restores the
    default handlers of SIGTERM, SIGHUP and SIGINT, runs ``work()`` and leaves with ``os._exit`` and its
    status: it never returns into the caller's code, and runs none of the caller's ``atexit`` handlers.
    An exception ``work`` does not handle prints its traceback and exits 1, as an interpreter would.
    """

    def __init__(self, work: Callable[[], int], env: Mapping[str, str]) -> None:
        for stream in (sys.stdout, sys.stderr):  # what is buffered here must not be written twice
            with contextlib.suppress(Exception):
                stream.flush()
        # The objects this process holds stay out of the child's collections: a collection that walked them
        # would copy every page they lie on (copy-on-write), which made importing autograd in the child
        # twice as slow as in a new interpreter.
        gc.freeze()
        pid = os.fork()
        if pid:
            gc.unfreeze()
        else:  # the worker
            code = 1
            try:
                os.setsid()
                os.environ.update(env)
                for name in ("SIGTERM", "SIGHUP"):
                    signal.signal(getattr(signal, name), signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                code = int(work())
            except SystemExit as err:
                code = err.code if isinstance(err.code, int) else 0 if err.code is None else 1
            except KeyboardInterrupt:
                code = 130
            except BaseException:  # noqa: BLE001 - as an interpreter would: the traceback, then status 1

                traceback.print_exc()
            finally:
                for stream in (sys.stdout, sys.stderr):
                    with contextlib.suppress(Exception):
                        stream.flush()
                os._exit(code)
        self.pid = pid
        self.returncode: int | None = None
        try:  # readable once the child has exited (Linux 5.3): wait() wakes at once, not at its next poll
            self._pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: nothing more to learn
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
                if self._pidfd is not None:
                    os.close(self._pidfd)
                    self._pidfd = None
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; raises :class:`subprocess.TimeoutExpired` after ``timeout`` seconds."""
        import subprocess  # slow to import

        end = None if timeout is None else time.monotonic() + timeout
        delay = 0.0005
        while self.poll() is None:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
            if self._pidfd is not None:
                select.select([self._pidfd], [], [], left)
            else:
                delay = min(delay * 2, 0.05, left if left is not None else 0.05)
                time.sleep(delay)
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


#: Environment variable with the pid of the probe that started a worker (see :func:`die_with_parent`).
PARENT_ENV = "KINKCHECK_PROBE_PARENT"


#: Environment variable set ("1") for a worker started after another one crashed (it does not announce resuming).
RESTARTED_ENV = "KINKCHECK_PROBE_RESTARTED"


def die_with_parent() -> None:
    """In a probe worker: be killed when the probe that started it dies, even by SIGKILL (Linux only).

    The worker has its own session, so neither a signal to the probe's group nor the probe's exit reaches it;
    an orphan would go on writing the journal beside the next probe's worker (or loop forever in a case
    that hangs). Exits at once when that probe is already gone.
    """
    if not sys.platform.startswith("linux"):
        return

    try:
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no prctl in this libc: the time limits still hold
        return
    parent = os.environ.get(PARENT_ENV, "")
    if parent.isdigit() and os.getppid() != int(parent):  # it died before prctl took effect
        os._exit(1)


@contextlib.contextmanager
def _exit_on_termination() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit while a worker runs, so that its group is killed on the way out
    (the worker has its own session: a signal to the probe no longer reaches it, and an orphan that hangs
    would run forever)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    names = [n for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]  # Windows has no SIGHUP
    old = {n: signal.signal(getattr(signal, n), leave) for n in names}
    try:
        yield
    finally:
        for n, handler in old.items():
            signal.signal(getattr(signal, n), handler)


if __name__ == "__main__":  # python -m kinkcheck.probe.worker: the module's own classes, not __main__'s copies
    from kinkcheck.probe import worker

    sys.exit(worker._worker())
