"""The kink hits of a user's own model: ``--model MODULE:FUNCTION`` (a factory) and ``--data MODULE:FUNCTION`` (its
batches) run under the framework's kink-hit counter, the sites summed by layer. ``kinkcheck census --model`` shows
them; ``kinkcheck lock`` writes the conventions they rely on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kinkcheck.frameworks import kink_counters
from kinkcheck.kinkhits import Site, merge_sites
from kinkcheck.probe.usercode import UserCodeError, load_function

__all__ = ["CensusError", "call_user", "load_user_function", "user_census"]


class CensusError(ValueError):
    """A ``--model`` or ``--data`` that cannot be used (one line)."""


def load_user_function(spec: str, what: str) -> Callable[..., Any]:
    """``module:function`` or ``path/to/file.py:function`` → the function (:func:`kinkcheck.probe.usercode.load_function`,
    as ``kinkcheck check`` loads its two functions)."""
    try:
        return load_function(spec)
    except UserCodeError as err:
        raise CensusError(f"{what}: {err}") from None


def call_user(fn: Callable[[], Any], what: str) -> Any:
    """``fn()``, the user's factory or data; whatever it raises (``sys.exit`` too) as one :class:`CensusError` line."""
    try:
        return fn()
    except SystemExit as err:  # the user's code called sys.exit(0): not a success of ours, nothing was counted
        raise CensusError(_exited(what, err)) from None
    except Exception as err:  # noqa: BLE001 - the user's factory failed: one line
        raise CensusError(f"{what} failed: {type(err).__name__}: {' '.join(str(err).split())[:300]}") from None


def _exited(what: str, err: SystemExit) -> str:
    """One line for user code that raised SystemExit (``sys.exit(0)`` in a factory, its data or its forward pass):
    kinkcheck would otherwise exit with that status, 0 included, having written nothing."""
    return f"{what} called sys.exit({err.code!r}): the user's code must return, not exit"


def user_census(model: str, data: str, batches: int = 5, eval_mode: bool = False) -> tuple[str, list[Site], str]:
    """Kink hits of the user's model over ``batches`` minibatches.

    ``model`` names a factory returning a ``torch.nn.Module`` (its forward pass is counted), or, for JAX, a pair
    ``(apply, params)`` with ``apply(params, x)``; ``data`` a function returning an iterable of inputs ``x`` or
    of ``(x, y)`` pairs. A module runs in the mode its factory left it in (training, unless it called
    ``.eval()``: dropout's zeros are then kink hits too), or in eval mode with ``eval_mode``. Returns the
    framework (``"torch"`` or ``"jax"``), the sites summed by layer, and the mode it ran in (a sentence).

    Raises
    ------
    CensusError
        A spec that is not ``module:function``, cannot be imported, or returns something else; the factory,
        the data or the model's forward pass failing (named, one line); no batch at all.
    """
    made = call_user(load_user_function(model, "--model"), f"--model {model}")
    loader = call_user(load_user_function(data, "--data"), f"--data {data}")
    if not isinstance(loader, Iterable):
        raise CensusError(f"--data {data!r} returned a {type(loader).__name__}, not an iterable of batches")
    passes: list[list[Site]] = []
    counters = kink_counters()
    kind = next((name for name, counter in counters.items() if counter.is_model(made)), None)
    if kind is None:
        raise CensusError(f"--model {model!r} returned a {type(made).__name__}: want "
                          + " or ".join(f"{c.MODEL} for {name}" for name, c in counters.items()))
    mode, one_pass = counters[kind].model_passes(made, eval_mode)
    batch_iter = iter(loader)
    for n in range(1, batches + 1):
        try:
            batch = next(batch_iter)
        except StopIteration:
            break
        except SystemExit as err:
            raise CensusError(_exited(f"--data {data} (batch {n})", err)) from None
        except Exception as err:  # noqa: BLE001 - the user's data failed: one line
            raise CensusError(f"--data {data} failed on batch {n}: {type(err).__name__}: "
                              f"{' '.join(str(err).split())[:300]}") from None
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        try:
            passes.append(one_pass(x))
        except SystemExit as err:
            raise CensusError(_exited(f"the model's forward pass (batch {n})", err)) from None
        except Exception as err:  # noqa: BLE001 - the user's model failed: one line
            raise CensusError(f"the model's forward pass failed on batch {n}: "
                              f"{type(err).__name__}: {' '.join(str(err).split())[:300]}") from None
    if not passes:
        raise CensusError(f"--data {data!r} gave no batch")
    return kind, merge_sites(passes), mode
