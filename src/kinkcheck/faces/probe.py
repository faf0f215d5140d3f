"""``kinkcheck probe``: the catalog measured in the installed framework (:mod:`kinkcheck.probe.command`)."""

from __future__ import annotations

import argparse
from typing import Any

from kinkcheck.faces.shared import framework_name
from kinkcheck.platforms.isa import LEVELS
from kinkcheck.platforms import DEVICES
from kinkcheck.registry import FRAMEWORKS

#: Where the command stands in ``kinkcheck --help``.
POSITION = 40


def add_parser(sub: Any) -> None:
    """Add the command to ``kinkcheck``'s subcommands."""
    # on first use: not loaded at start-up
    from kinkcheck.probe.worker import (DEFAULT_BATCH_TIMEOUT_S, DEFAULT_CASE_TIMEOUT_S, DEFAULT_PROBE_MEMORY_GIB,
                                        ENV_BATCH_TIMEOUT, ENV_CASE_TIMEOUT, ENV_PROBE_MEMORY)
    pr = sub.add_parser("probe", help="probe the catalog in the installed framework and merge it into its shard",
                        description="Measures the catalog (or the --case, --mode, --dtype cells asked for) and merges "
                                    "the result into the environment's shard atomically: the cells probed are "
                                    "replaced, every other cell is kept, and so are cases the --catalog does not hold "
                                    "(unless --drop-removed). A measured (ok) value is never replaced by an error or "
                                    "unavailable cell of the same build (kept, and counted in the shard's history); a "
                                    "write that would lower the shard's count of measured observations is refused "
                                    "(exit 2). A killed probe resumes from its journal (.<id>.<selection>.journal.jsonl "
                                    "beside the shard, one per selection of cases, modes and dtypes); one probe per "
                                    "environment at a time (.<id>.lock).")
    pr.add_argument("--framework", choices=FRAMEWORKS, type=framework_name, help="default with --out-dir: every installed framework")
    pr.add_argument("--out", help="shard file, for one --framework; must be named <framework>-<version>-<device>[-<platform>].json "
                                  "after the environment probed")
    pr.add_argument("--out-dir", help="folder: one shard per framework, named <framework>-<version>-<device>[-<platform>].json (the platform tag off Linux x86-64, e.g. -macos_arm64)")
    pr.add_argument("--device", default="cpu", choices=tuple(DEVICES),
                   help="cpu (default) | cuda | metal (Apple silicon's GPU: torch's MPS backend, MLX's mx.gpu)")
    pr.add_argument("--isa", metavar="LEVEL", choices=tuple(LEVELS),
                    help="cap the frameworks' CPU kernels at this x86-64 instruction-set level (x86-64-v2, -v3, -v4: "
                         "oneDNN, ATen, MKL, XLA and OpenBLAS dispatch no higher) and measure it as its own "
                         "environment, <framework>-<version>-<device>-linux_x86_64_v2; the CPU's own level or "
                         "one below it")
    pr.add_argument("--dtype", action="append", default=[], help="repeatable; default all four dtypes")
    pr.add_argument("--mode", action="append", default=[], help="repeatable; default every mode of the framework")
    pr.add_argument("--case", action="append", default=[], metavar="ID",
                    help="repeatable; probe only this catalog case (default every case)")
    pr.add_argument("--replace", action="store_true",
                    help="an explicit full re-measure: replace the shard there is instead of merging into it "
                         "(not with --case, --mode or --dtype)")
    pr.add_argument("--drop-removed", action="store_true",
                    help="drop from the shard the cases the --catalog does not hold (default: keep them as they are, "
                         "so a catalog cut to a few cases loses nothing)")
    pr.add_argument("--catalog", help="catalog TOML (default references/catalog.toml)")
    pr.add_argument("--staged", action="store_true",
                    help="the staged cases too (staged/catalog.toml beside the catalog): measured into the shard "
                         "ahead of their move into the catalog, not reported before it; --drop-removed keeps them")
    pr.add_argument("--quiet", action="store_true", help="no progress bar")
    pr.add_argument("--no-isolate", action="store_true",
                    help="probe in this process, without the time and memory limits (default: a worker process, "
                         "restarted after a case that crashes it or runs past a limit)")
    pr.add_argument("--case-timeout", metavar="SECONDS",
                    help=f"seconds one case's eager cells may take before the worker is killed and the case "
                         f"recorded as errors (default ${ENV_CASE_TIMEOUT}, else {DEFAULT_CASE_TIMEOUT_S:g})")
    pr.add_argument("--batch-timeout", metavar="SECONDS",
                    help=f"the same for one compiled batch (the catalog in one mode and dtype) or chunk of one "
                         f"(default ${ENV_BATCH_TIMEOUT}, else {DEFAULT_BATCH_TIMEOUT_S:g})")
    pr.add_argument("--memory", metavar="GIB",
                    help=f"memory limit of the probe worker in GiB; an allocation past it becomes an error cell "
                         f"(default ${ENV_PROBE_MEMORY}, else {DEFAULT_PROBE_MEMORY_GIB:g})")
    pr.add_argument("--worker", metavar="JOURNAL", help=argparse.SUPPRESS)
    pr.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kinkcheck.probe.command import probe_command  # on first use: not loaded at start-up

    return probe_command(args)
