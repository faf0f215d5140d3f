"""Take shards measured on an accelerator into references/observations/: merged into the shard there is, with
what the probe itself caused withdrawn and recorded as not measured (issue 30).

    python tools/import_device_shards.py SHARD.json|ARCHIVE.tgz [...] [--modes-not-reached REASON] [--out DIR]

An ARCHIVE is what ``python -m kinkcheck.lanes --archive`` (``tools/device-run.sh run``) wrote: its
``shards/*.json`` are taken. A cell whose error says the program's tensors were on different devices was caused
by the probe (before the default-device context, a program's own constants were made on the CPU beside inputs
on the accelerator): it is withdrawn (:func:`kinkcheck.probe.plan.withdraw`), and the next probe of the environment
measures it. With ``--modes-not-reached``, the framework's modes the shard did not probe are recorded as not
measured with that reason. Each shard is then merged into ``DIR/<its name>`` (:func:`kinkcheck.probe.plan.write_merged`:
the cells it holds replace those there, every other cell is kept, and a merge that would hold fewer measured
values is refused). Every input is read and merged before anything is written: bad input (a missing or unreadable
file, a CPU shard, an empty reason, a merge refused) is one line and exit status 2, and nothing is written.

Run it with a Python that has kinkcheck's dependencies (``.nox/tests/bin/python``, or after ``pip install .``).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
try:
    import fastjsonschema  # noqa: F401  (what reading a shard needs, checked before anything is read)
    import msgspec  # noqa: F401
    import orjson  # noqa: F401

    from kinkcheck.catalog import CatalogError, load_catalog, with_staged
    from kinkcheck.vocabulary import FRAMEWORK_MODES
    from kinkcheck.probe.plan import merge_shard, not_measured_modes, read_old_shard, withdraw
    from kinkcheck.shards import ShardError, read_shard, shard_lock, write_shard
except ImportError as _err:  # e.g. the system python3 without msgspec
    print(f"import_device_shards: error: kinkcheck's dependencies are missing here ({_err}); run it with "
          ".nox/tests/bin/python, or after `pip install .`", file=sys.stderr)
    sys.exit(2)

#: What PyTorch says when one call gets tensors of two devices (``aten`` device checks and ``segment_reduce``'s).
MIXED = re.compile(r"Expected all tensors to be on the same device|get_device\(\) == \w+\.get_device\(\)")
PROBE_REASON = ("not measured: the probe of kinkcheck 2d3abce built this program's own constants on the CPU beside "
                "its inputs on {device}, and PyTorch refused the mix (\"Expected all tensors to be on the same "
                "device\"): the probe's error, not the framework's; re-measure on a {device} device (the probe now "
                "makes a program's tensors on the device probed)")


class Refused(Exception):
    """Bad input: one line, exit status 2."""


def _mixed(o: dict) -> bool:
    return bool(MIXED.search(o.get("error") or ""))


def _shards(paths: list[Path], tmp: Path) -> list[tuple[Path, str]]:
    """The shard files named (with the name to report them by), those inside an archive extracted into a folder of
    ``tmp`` of their own."""
    out = []
    for i, p in enumerate(paths):
        if p.is_dir():
            raise Refused(f"{p}: a folder, not a shard or an archive")
        if not p.is_file():
            raise Refused(f"{p}: no such file")
        if tarfile.is_tarfile(p):
            with tarfile.open(p) as tar:
                members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith("shards/")
                           and m.name.endswith(".json") and "/" not in m.name[len("shards/"):]]
                if not members:
                    raise Refused(f"{p}: an archive without shards/*.json")
                tar.extractall(tmp / str(i), members=members, filter="data")
            out += [(f, f"{p}:shards/{f.name}") for f in sorted((tmp / str(i) / "shards").glob("*.json"))]
        else:
            out.append((p, str(p)))
    return out


def _prepare(path: Path, name: str, modes_reason: str | None) -> dict:
    try:
        shard = read_shard(path)
    except ShardError as err:
        raise Refused(str(err).replace(str(path), name)) from None
    env = shard["environment"]
    if env["device"] == "cpu":
        raise Refused(f"{name}: {env['id']} was measured on the CPU; this takes shards measured on an accelerator "
                      "(a CPU shard is written by `nox -s report`)")
    if any(map(_mixed, shard["observations"])):
        shard = withdraw(shard, _mixed, PROBE_REASON.format(device=env["device"].upper()))
    lacking = [m for m in FRAMEWORK_MODES[env["framework"]] if m not in (env.get("modes") or ())]
    if modes_reason is not None and lacking:
        shard = not_measured_modes(shard, lacking, modes_reason)
    return shard


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="import_device_shards", description=__doc__.splitlines()[0])
    ap.add_argument("shards", nargs="+", type=Path, help="shard files, or archives of kinkcheck.lanes")
    ap.add_argument("--modes-not-reached", metavar="REASON", help="why the modes the shard lacks were not measured")
    ap.add_argument("--out", type=Path, default=ROOT / "references" / "observations")
    ap.add_argument("--catalog", help="catalog TOML (default references/catalog.toml)")
    args = ap.parse_args(argv)
    try:
        if args.modes_not_reached is not None and not args.modes_not_reached.strip():
            raise Refused("--modes-not-reached must say why")
        if not args.out.is_dir():
            raise Refused(f"--out {args.out}: no such folder")
        try:
            catalog = with_staged(load_catalog(args.catalog))
        except CatalogError as err:
            raise Refused(str(err)) from None
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as locks:
            merged: dict[Path, dict] = {}  # every input read, checked and merged before anything is written
            for path, name in _shards(args.shards, Path(tmp)):
                shard = _prepare(path, name, args.modes_not_reached)
                dest = args.out / f"{shard['environment']['id']}.json"
                try:
                    if dest not in merged:  # held until written: no probe writes it meanwhile
                        locks.enter_context(shard_lock(dest))
                    old = merged[dest] if dest in merged else read_old_shard(dest)
                    merged[dest] = merge_shard(old, shard, catalog)
                except ShardError as err:
                    raise Refused(f"{name}: {err}") from None
                print(f"{name}: {len(shard['observations'])} observations of {shard['environment']['id']} "
                      f"({len(shard['environment'].get('not_measured_parts') or [])} part(s) not measured)")
            for dest, shard in merged.items():
                write_shard(dest, shard)
                print(f"wrote {dest}: {len(shard['observations'])} observations, "
                      f"{len(shard['environment'].get('not_measured_parts') or [])} part(s) not measured")
    except Refused as err:
        print(f"import_device_shards: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
