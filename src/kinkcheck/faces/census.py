"""``kinkcheck census``: kink hits in training, of the reference MLP or of a user's model
(:mod:`kinkcheck.answers.hitcensus`)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from kinkcheck.errors import UsageError
from kinkcheck.faces.shared import REPORT_HELP
from kinkcheck.report.query import default_report

#: Where the command stands in ``kinkcheck --help``.
POSITION = 110


def add_parser(sub: Any) -> None:
    """Add the command to ``kinkcheck``'s subcommands."""
    cs = sub.add_parser("census", help="kink hits in training: how often an MLP's forward pass lands exactly on "
                                       "ReLU's kink by dtype and depth, and what ReLU'(0) changes (Bertoin et al., "
                                       "NeurIPS 2021); or, with --model and --data, the kink hits of your model")
    cs.add_argument("--model", metavar="MODULE:FUNCTION", help="a factory returning a torch.nn.Module, or "
                    "(apply, params) for JAX (also path/to/file.py:FUNCTION)")
    cs.add_argument("--data", metavar="MODULE:FUNCTION", help="a function returning the batches: inputs x or "
                    "(x, y) pairs")
    cs.add_argument("--batches", type=int, default=5, help="batches of --data to run (default 5)")
    cs.add_argument("--eval", action="store_true", help="run a torch module in eval mode (default: the mode its "
                    "factory left it in, said in the output; in training mode dropout's zeros are hits too)")
    cs.add_argument("--report", help="the report whose conventions the hits are shown with (" +
                    REPORT_HELP.split(" (", 1)[1].rstrip(")") + "; none: without)")
    cs.add_argument("--framework", choices=("torch", "jax"), default="torch",
                    help="the reference MLP's framework (default torch; jax: the same initialisations and "
                         "minibatches under jax.jit, no training run)")
    cs.add_argument("--depths", default="1,2,3,4,5", help="hidden layers of the reference MLP (default 1,2,3,4,5)")
    cs.add_argument("--dtypes", default="float64,float32,float16,bfloat16")
    cs.add_argument("--inits", type=int, default=100, help="random initialisations per dtype and depth (default "
                    "100; the paper ran 1,000)")
    cs.add_argument("--width", type=int, default=128, help="neurons per hidden layer (default 128; the paper 256)")
    cs.add_argument("--batch", type=int, default=256, help="minibatch size (default 256, as the paper)")
    cs.add_argument("--passes", type=int, default=1, help="passes over the digits per initialisation (default 1)")
    cs.add_argument("--train-epochs", type=int, default=30, help="epochs of each training run (default 30; 0: no "
                    "training run)")
    cs.add_argument("--seed", type=int, default=0)
    cs.add_argument("--out", metavar="FILE", help="write the measurement (JSON, with its provenance) here")
    cs.add_argument("--replace", action="store_true", help="with --out: measure again over an existing file")
    cs.add_argument("--quiet", action="store_true", help="no progress bar")
    cs.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kinkcheck.answers import hitcensus as hc  # slow: numpy

    if (args.model is None) != (args.data is None):
        raise UsageError("census: --model and --data go together (a model factory and its batches)")
    if args.model is not None:
        return _census_of_model(args, hc)
    try:
        depths = tuple(int(d) for d in args.depths.split(","))
        dtypes = tuple(d.strip() for d in args.dtypes.split(","))
    except ValueError:
        raise UsageError(f"census: --depths takes integers separated by commas, got {args.depths!r}") from None
    bad = [d for d in dtypes if d not in hc.DTYPES]
    if bad or not dtypes:
        raise UsageError(f"census: unknown dtype {bad[0] if bad else ''!r} (known: {', '.join(hc.DTYPES)})")
    if any(d < 1 or d > 12 for d in depths) or min(args.inits, args.width, args.batch, args.passes) < 1:
        raise UsageError("census: depths 1-12, and --inits, --width, --batch, --passes at least 1")
    if args.batch > 1797 or args.width > 4096 or args.train_epochs < 0 or args.passes > 1000:
        raise UsageError("census: --batch at most 1797 (the digits there are), --width at most 4096, --passes at "
                         "most 1000, --train-epochs at least 0 (0: no training run)")
    out = Path(args.out) if args.out else None
    if out is not None:  # every way the write could fail is found before minutes of measuring
        if out.is_dir():
            raise UsageError(f"census: --out {out} is a folder; name a file, e.g. {out / 'torch-2.13.0-cpu.json'}")
        if out.exists() and not args.replace:
            raise UsageError(f"census: {out} exists (a measurement); --replace to measure it again")
        parent = next((p for p in (out.parent, *out.parent.parents) if p.exists()), Path("."))
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(f"census: --out {out}: {parent} is not a folder this user can write into")
    scale = hc.Scale(depths=depths, dtypes=dtypes, inits=args.inits, width=args.width, batch=args.batch,
                     passes=args.passes, train_epochs=args.train_epochs, seed=args.seed)

    needs = ("census needs PyTorch and scikit-learn (pip install torch scikit-learn; jax for --framework jax): "
             "No module named {!r}")
    missing = [m for m in ("torch", "sklearn", *(("jax",) if args.framework == "jax" else ())) if
               importlib.util.find_spec(m) is None]  # before the progress bar: the one line says only what is missing
    if missing:
        raise UsageError(needs.format(missing[0]))
    try:
        record = _census_run(hc, scale, args.quiet, args.framework)
    except ImportError as err:  # a module the census imports is there but does not load
        raise UsageError(needs.format(err.name or str(err))) from None
    except (MemoryError, RuntimeError) as err:  # an allocation the machine cannot make: the scale is too large
        raise UsageError(f"census: the scale does not fit this machine: {' '.join(str(err).split())[:200]}") from None
    sys.stdout.write(hc.render_run(record))  # first: a write that fails still leaves the tables shown
    sys.stdout.flush()
    if out is not None:
        from kinkcheck.shards import write_text_atomic  # on first use: not loaded at start-up

        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(out, json.dumps(record, indent=1, sort_keys=True) + "\n")
        except OSError as err:
            raise UsageError(f"census: cannot write {out}: {err.strerror or err} (the tables above are the "
                             "measurement)") from None
    return 0


def _census_run(hc: Any, scale: Any, quiet: bool, framework: str) -> dict[str, Any]:
    if quiet:
        return hc.run(scale, framework=framework)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = len(scale.depths) * len(scale.dtypes) * scale.inits
    with Progress(TextColumn("[bold]census[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=Console(stderr=True)) as progress:
        task = progress.add_task("", total=total)

        def tick(label: str, _total: int) -> None:
            progress.update(task, description=label)
            progress.advance(task)

        return hc.run(scale, tick, framework)


def _census_of_model(args: argparse.Namespace, hc: Any) -> int:
    from kinkcheck.report.model import ReportError, load_report  # slow: numpy

    if args.batches < 1:
        raise UsageError(f"census: --batches at least 1, got {args.batches}")
    report = None
    if args.report != "none":  # before the model runs: a wrong path costs nothing
        args.report = args.report or str(default_report())
        try:
            report = load_report(args.report)
        except (OSError, ReportError) as err:
            raise UsageError(f"census: --report {args.report}: {getattr(err, 'strerror', None) or err}") from None
    from kinkcheck.probe.userhits import CensusError, user_census  # on first use: not loaded at start-up

    try:
        framework, sites, mode = user_census(args.model, args.data, args.batches, args.eval)
    except CensusError as err:
        raise UsageError(f"census: {err}") from None
    from importlib.metadata import PackageNotFoundError, version  # slow to import

    try:
        installed = version(framework).split("+")[0]
    except PackageNotFoundError:
        installed = None
    sys.stdout.write(hc.render_sites(framework, sites, report, installed, mode))
    return 0
