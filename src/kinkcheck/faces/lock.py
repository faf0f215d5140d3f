"""``kinkcheck lock``: the conventions a model relies on, written and checked (:mod:`kinkcheck.answers.lock`)."""

from __future__ import annotations

import argparse
from typing import Any

from kinkcheck.platforms.isa import LEVELS

#: Where the command stands in ``kinkcheck --help``.
POSITION = 30


def add_parser(sub: Any) -> None:
    """Add the command to ``kinkcheck``'s subcommands."""
    lk = sub.add_parser(
        "lock", help="write kinkcheck.lock: the convention of each kinked call a model makes (--model, --data); "
                     "--check: exit 1 when another release changes one",
        description="Runs your model on your batches under kinkcheck's kink-hit counters and writes kinkcheck.lock "
                    "(TOML): for each kinked call it reaches (relu, clamp, maximum, max, pooling, ...), your call site, "
                    "the question that asks its convention, and the convention in the installed release (the "
                    "report's cell, or measured here, with the rules' prediction beside it). --check compares the lock "
                    "with another release (--release: the report's cell, else the rules' prediction, marked "
                    "predicted, else measured in that release's environment), another framework "
                    "(--framework-version jax==R, paired as kinkcheck migrate pairs programs) or the report's CUDA cells (--device cuda --release R). Read docs/lock.md.",
        epilog="Exit status of --check: 0 nothing the model relies on changes, 1 a locked convention changed (one line "
               "per site), 2 bad input.")
    lk.add_argument("--model", metavar="MODULE:FUNCTION", help="returns a torch.nn.Module (its forward pass is run) "
                    "or a JAX (apply, params) pair (apply(params, x) is run)")
    lk.add_argument("--data", metavar="MODULE:FUNCTION", help="returns an iterable of inputs or (input, target)")
    lk.add_argument("--batches", type=int, default=5, help="forward passes run (default 5)")
    lk.add_argument("--eval", action="store_true", help="run the module in eval mode")
    lk.add_argument("--lock", metavar="PATH", help="the lock file (default $KINKCHECK_LOCK, else ./kinkcheck.lock)")
    lk.add_argument("--check", action="store_true", help="compare the lock with --release (default: the installed "
                    "release)")
    lk.add_argument("--release", metavar="VERSION", help="with --check: a release of the framework's matrix")
    lk.add_argument("--framework-version", metavar="FW==VERSION", help="with --check: a release of the lock's "
                    "framework (torch==2.14.1, as --release), or of another framework (jax==0.4.30: each site that is "
                    "a catalog case against that framework's programs of the case, from the report's cells)")
    lk.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="with --check: compare with the report's "
                    "cells on this device (cuda: the releases the report measured on an NVIDIA GPU; with --release, "
                    "else the lock's release); default cpu")
    lk.add_argument("--isa", metavar="LEVEL", choices=tuple(LEVELS), help="with --check: compare with the report's "
                    "CPU cells at this x86-64 instruction-set level (x86-64-v2: SSE4.2, -v3: AVX2; the releases the "
                    "report measured under that cap, kinkcheck probe --isa): does the model's gradient change on a "
                    "CPU without AVX-512? With --release, else the lock's release")
    lk.add_argument("--report-only", action="store_true", help="with --check: measure nothing: each site is compared "
                    "with the report's cell, else with the rules' prediction; the others are 'not compared' (default: "
                    "measured in that release's environment, made the first time)")
    lk.add_argument("--measure", action="store_true", help="with --check --release R: measure the sites the report "
                    "has no cell for in R's environment (made the first time: about 5.5 GB for torch) instead of "
                    "comparing them with the rules' prediction for R (the default where R is not installed)")
    lk.add_argument("--quiet", action="store_true", help="no progress on stderr")
    lk.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kinkcheck.answers.lock import command  # slow: msgspec

    return command(args)
