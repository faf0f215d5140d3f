"""Bounded evaluation: ``grad`` and ``check`` run in a worker with a time and a memory limit (issue 10)."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest
from probing import by_program, linux_only, run_cli

from kinkcheck.probe import worker as bounded
from kinkcheck.probe.worker import BoundExceeded, Limits, TaskError
from kinkcheck.cli import main
from kinkcheck.shards import read_shard


def _one_error_line(capsys) -> str:
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert out == "" and len(lines) == 1 and "Traceback" not in err, f"one line on stderr, got {err!r}"
    return lines[0]


def test_limits_come_from_options_then_environment_then_defaults():
    assert Limits.resolve(environ={}) == Limits(bounded.DEFAULT_TIMEOUT_S, bounded.DEFAULT_MEMORY_GIB)
    env = {bounded.ENV_TIMEOUT: "30", bounded.ENV_MEMORY: "2.5"}
    assert Limits.resolve(environ=env) == Limits(30.0, 2.5), "the environment overrides the defaults"
    assert Limits.resolve("7", None, environ=env) == Limits(7.0, 2.5), "an option overrides the environment"
    for bad in ("0", "-1", "inf", "nan", "ten"):
        with pytest.raises(ValueError, match="--timeout must be a number of seconds above 0"):
            Limits.resolve(bad, None, environ={})
    with pytest.raises(ValueError, match=f"{bounded.ENV_MEMORY} must be a number of GiB from 0.5"):
        Limits.resolve(environ={bounded.ENV_MEMORY: "0"})


def test_grad_in_a_worker_gives_the_in_process_value(capsys, torch_adapter, jax_adapter):
    for args, expected in ((["grad", "torch.amax(v)", "--at", "v=[1,3,3]"], {"v": [0.0, 0.5, 0.5]}),
                           (["grad", "jax.numpy.sqrt(x)", "--at", "x=0"], {"x": "inf"})):
        assert main([*args, "--no-judge"]) == 0, capsys.readouterr().err  # the bare value (judged: test_explain)
        out = capsys.readouterr().out.strip().splitlines()
        assert len(out) == 1 and json.loads(out[0]) == expected, f"{args}: {out}"


def test_a_program_that_never_returns_is_stopped(capsys, jax_adapter):
    code = main(["grad", "jax.lax.while_loop(jax.numpy.isfinite, jax.numpy.abs, x)", "--at", "x=0", "--timeout", "3"])
    line = _one_error_line(capsys)
    assert code == 2 and "the evaluation exceeded 3 s" in line, line


def test_a_program_that_allocates_40_gb_is_stopped(capsys, torch_adapter):
    code = main(["grad", "torch.ones(100000, 100000).sum() * x", "--at", "x=1"])
    line = _one_error_line(capsys)
    assert code == 2 and "exceeded the memory limit of 8 GiB" in line, line


def test_errors_inside_the_worker_stay_one_line(capsys, torch_adapter):
    assert main(["grad", "torch.nn.functional.rleu(x)", "--at", "x=0"]) == 2
    assert "'torch.nn.functional.rleu' does not exist" in _one_error_line(capsys)
    assert main(["grad", "torch.argmax(x)", "--at", "x=[1,2]"]) == 2
    assert "which has no gradient" in _one_error_line(capsys)


USER = textwrap.dedent('''
    import os
    import signal
    import torch
    import jax.numpy as jnp

    def torch_layer(x, w):
        print("a user's print must not corrupt the worker's answer")
        return torch.relu(x * w)

    def jax_layer(x, w):
        return jnp.maximum(x * w, 0.0)

    def spin(x, w):
        while True:
            pass

    def hog(x, w):
        return torch.ones(100000, 100000).sum() * x

    def dies(x, w):
        os.kill(os.getpid(), signal.SIGKILL)


    def faults(x, w):
        os.kill(os.getpid(), signal.SIGSEGV)
''')


@pytest.fixture()
def user(tmp_path, monkeypatch, torch_adapter, jax_adapter):
    (tmp_path / "userbound.py").write_text(USER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_check_in_a_worker_gives_the_in_process_result(user):
    payload = {"first": "userbound:torch_layer", "second": "userbound:jax_layer", "at": {"x": 0.5, "w": 2.0},
               "frameworks": ["torch", "jax"], "dtype": "float64"}
    isolated = bounded.run("check", payload, Limits(120, 8))
    inline = json.loads(json.dumps(bounded.run_inline("check", payload)))
    assert isolated == inline, "the worker's result is the in-process result"
    assert sum(p["differs"] for p in isolated["points"]) == 2, isolated


@pytest.mark.parametrize(
    "function, limits, message",
    [
        ("spin", Limits(3, 8), "the evaluation exceeded 3 s"),
        ("hog", Limits(120, 8), "exceeded the memory limit of 8 GiB"),
        ("dies", Limits(120, 8), "the evaluation was killed by SIGKILL"),
        ("faults", Limits(120, 8), "the evaluation crashed with SIGSEGV (a fault in a framework's native code"),
    ],
)
def test_check_functions_are_bounded_too(user, function, limits, message):
    payload = {"first": f"userbound:{function}", "second": "userbound:jax_layer", "at": {"x": 0.5, "w": 2.0},
               "frameworks": ["torch", "jax"], "dtype": "float64"}
    with pytest.raises(BoundExceeded) as info:
        bounded.run("check", payload, limits)
    assert message in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert ("memory limit" in str(info.value)) == (function in ("hog", "dies")), \
        f"only a process stopped by its limits is blamed on them: {info.value}"


def test_bad_input_found_in_the_worker_is_a_task_error(user):
    payload = {"first": "userbound:nope", "second": "userbound:jax_layer", "at": {"x": 0.5, "w": 2.0},
               "frameworks": ["torch", "jax"], "dtype": "float64"}
    with pytest.raises(TaskError, match="userbound has no function 'nope'"):
        bounded.run("check", payload, Limits())


def test_a_device_this_machine_lacks_is_its_own_error_in_and_out_of_the_worker(torch_adapter):
    """grad answers from the report when the device is absent: the worker says so by kind (NoDevice), not by a
    message a face would have to recognise; another failure stays a plain TaskError."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device exists here; the no-device path cannot be exercised")
    payload = {"expr": "torch.relu(x)", "at": {"x": 0.0}, "framework": "torch", "dtype": "float64",
               "device": "cuda", "mode": "reverse"}
    for run in (bounded.run, bounded.run_inline):
        with pytest.raises(bounded.NoDevice, match="not measured: no CUDA device"):
            run("grad", payload, Limits())
    with pytest.raises(TaskError) as err:
        bounded.run("grad", {**payload, "device": "cpu", "expr": "torch.nope(x)"}, Limits())
    assert not isinstance(err.value, bounded.NoDevice), f"an unknown name is not an absent device: {err.value!r}"


# -- issue 11 part 4: callables passed as values, non-finite points, --wrt and int: inputs through the worker ----


def _grad_line(capsys, args) -> dict:
    code = main([*args, "--no-judge"])  # the bare value; the judgement is tested in test_explain.py
    out, err = capsys.readouterr()
    assert code == 0, f"{args}: exit {code}: {err}"
    return json.loads(out)


def test_a_callable_passed_as_a_value_runs_in_the_bounded_worker(capsys, jax_adapter):
    """A resolved function is a value like any other (``lax.map``'s body, ``while_loop``'s test and body);
    what bounds it is the worker: at x = inf ``while_loop(isfinite, abs, x)`` ends at once (the forward
    tangent of the identity, 1), at x = 0 it never ends and the time limit stops it (test above)."""
    assert _grad_line(capsys, ["grad", "jax.lax.map(jax.numpy.abs, v)", "--at", "v=[-1,2]"]) == {"v": [-1.0, 1.0]}
    args = ["grad", "jax.lax.while_loop(jax.numpy.isfinite, jax.numpy.abs, x)", "--at", "x=inf", "--mode", "forward"]
    assert _grad_line(capsys, args) == {"x": 1.0}, "the loop's test is False at inf: the identity"


@pytest.mark.parametrize("source, reason", [
    ("torch.func.grad(torch.sin)(x)", "'torch.func' is the module 'torch.func', outside the expression namespace"),
    ("jax.jit(jax.numpy.abs)(x)", "'jit' is refused"),
    ("jax.pure_callback(jax.numpy.abs, x, x)", "'pure_callback' is refused"),
    ("torch.cond(x > 0, torch.sin, torch.cos, (x,))", "is refused"),
])
def test_callables_that_compile_trace_or_call_back_are_refused_before_running(capsys, torch_adapter, source, reason):
    assert main(["grad", source, "--at", "x=1", "--no-isolate"]) == 2, source
    line = _one_error_line(capsys)
    assert reason in line, f"{source}: {line}"


def test_non_finite_points_wrt_and_int_inputs_cross_the_worker(capsys, torch_adapter):
    """The payload is JSON: inf/nan travel as Infinity/NaN, --wrt and int: as name lists."""
    args = ["grad", "torch.where(x <= 10, torch.exp(x), 1.0) * y ** k", "--at", "x=inf,y=2,k=int:3", "--wrt", "y"]
    assert _grad_line(capsys, args) == {"y": 12.0}, "d/dy of 1 * y**3 at y = 2; x and k are constants"
    assert _grad_line(capsys, ["grad", "torch.exp(x)", "--at", "x=-inf"]) == {"x": 0.0}


@pytest.mark.parametrize("stdin, why", [
    (b"garbage", "JSONDecodeError"),
    (b'{"task": "nope", "payload": {}, "memory_gib": 1, "memory_bytes": 1}', "KeyError: 'nope'"),
    (b"[1]", "TypeError"),
    (b"\xff", "UnicodeDecodeError"),
])
def test_the_worker_entry_refuses_what_is_not_a_request_in_one_line(stdin, why):
    """``python -m kinkcheck.probe.worker`` is run by :func:`run`; anything else on its stdin is one line, exit 2."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "kinkcheck.probe.worker"], input=stdin, capture_output=True,
                         timeout=60)
    err = res.stderr.decode()
    assert res.returncode == 2, (res.returncode, err)
    assert err.count("\n") == 1 and why in err and "Traceback" not in err, err
    assert res.stdout == b"", "no answer on stdout"


# --- A worker forked from the probe instead of a new interpreter (issue 13: a light framework's fixed cost) ----


@linux_only
def test_a_forked_worker_reports_its_status_like_popen(tmp_path):
    """ForkedWorker is the part of Popen the probe uses: the status (negative for a signal), wait with a
    time limit, kill; the child leads its own session and never runs this process's atexit handlers."""
    import os
    import signal
    import subprocess

    from kinkcheck.probe import ForkedWorker

    marker = tmp_path / "sid"

    def work():
        marker.write_text(f"{os.getsid(0)} {os.getpid()} {os.environ['KINKCHECK_TEST_VALUE']}")
        return 3

    w = ForkedWorker(work, {"KINKCHECK_TEST_VALUE": "seen"})
    assert w.wait(timeout=60) == 3 and w.poll() == 3 and w.returncode == 3
    sid, pid, value = marker.read_text().split()
    assert sid == pid == str(w.pid) and value == "seen", "its own session, the environment given"
    assert "KINKCHECK_TEST_VALUE" not in os.environ, "the environment is the child's only"

    def boom():
        raise RuntimeError("inside the worker")

    assert ForkedWorker(boom, {}).wait(timeout=60) == 1, "an exception exits 1, as an interpreter would"
    assert ForkedWorker(lambda: (_ for _ in ()).throw(SystemExit(130)), {}).wait(timeout=60) == 130

    def sleep():
        import time

        time.sleep(600)
        return 0

    slow = ForkedWorker(sleep, {})
    with pytest.raises(subprocess.TimeoutExpired):
        slow.wait(timeout=0.2)
    assert slow.poll() is None
    slow.kill()
    assert slow.wait(timeout=60) == -signal.SIGKILL, "a signal is a negative status, as Popen says it"


def test_a_worker_is_forked_only_from_a_clean_process(monkeypatch):
    """Not where a framework is imported (its threads and device context do not survive fork), not where
    more threads run, not with KINKCHECK_PROBE_START=spawn, not off Linux."""
    import threading

    from kinkcheck.probe import worker as pr

    monkeypatch.setattr(pr, "FRAMEWORKS", ("kinkcheck_nofw",))  # none imported here (the tests import all)
    monkeypatch.delenv("KINKCHECK_PROBE_START", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    assert pr.fork_safe() == (threading.active_count() == 1)
    monkeypatch.setitem(sys.modules, "kinkcheck_nofw", object())
    assert not pr.fork_safe(), "a framework imported here"
    monkeypatch.delitem(sys.modules, "kinkcheck_nofw")
    monkeypatch.setenv("KINKCHECK_PROBE_START", "spawn")
    assert not pr.fork_safe(), "spawn asked for"
    monkeypatch.delenv("KINKCHECK_PROBE_START")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not pr.fork_safe(), "macOS: no fork without exec"


@linux_only
def test_forked_and_spawned_workers_measure_the_same(torch_adapter, small, tmp_path):
    """The default probe forks its worker from the CLI process; KINKCHECK_PROBE_START=spawn starts a new
    interpreter. Both give the same cells, and both survive a crashing case."""
    import os
    import subprocess

    from kinkcheck.probe import environment_id

    shards = {}
    for start in ("fork", "spawn"):
        out = tmp_path / start / f"{environment_id('torch')}.json"
        out.parent.mkdir()
        env = {**os.environ, "KINKCHECK_PROBE_START": start, "KINKCHECK_CRASH_CASE": "maximum@tie"}
        res = subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--catalog",
                              small.path, "--out", str(out), "--quiet", "--mode", "reverse", "--dtype", "float64"],
                             env=env, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        shards[start] = read_shard(out)
    fork, spawn = (by_program(shards[s]) for s in ("fork", "spawn"))
    assert fork == spawn, "the same cells from a forked and a spawned worker"
    assert fork["torch.relu(x)"]["value"] == {"x": 0.0}
    assert fork["torch.maximum(x, y)"]["error"].startswith("interpreter crashed: signal 6 (SIGABRT)"), fork


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_an_unreadable_shard_stops_the_probe_before_it_measures(torch_adapter, small, tmp_path, start):
    """The shard a probe merges into is read while the worker starts; unreadable, the probe stops then (one line,
    exit 2), not after measuring the whole catalog, and leaves the file and no journal behind."""
    import os
    import subprocess
    import time

    from kinkcheck.probe import environment_id

    out = tmp_path / f"{environment_id('torch')}.json"
    out.write_text('{"schema": "kinkcheck/shard/v2", "environment": {')
    env = {**os.environ, "KINKCHECK_PROBE_START": start}
    began = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "kinkcheck", "probe", "--framework", "torch", "--catalog", small.path,
                          "--out", str(out), "--quiet"], env=env, capture_output=True, text=True, timeout=600,
                         check=False)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "cannot write shard" in lines[0] and \
        "left as it is" in lines[0], res.stderr
    assert out.read_text() == '{"schema": "kinkcheck/shard/v2", "environment": {', "the file is left as it is"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.toml", out.name], "no journal, nothing else"
    assert time.monotonic() - began < 120


def test_an_unknown_start_method_is_one_line(small, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KINKCHECK_PROBE_START", "forkserver")
    rc = run_cli("probe", "--framework", "torch", "--catalog", small.path, "--out-dir", str(tmp_path), "--quiet")
    err = capsys.readouterr().err
    assert rc == 2 and "KINKCHECK_PROBE_START must be fork or spawn" in err and len(err.strip().splitlines()) == 1, err
