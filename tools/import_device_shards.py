"""Take shards measured on an accelerator into references/observations/, with what the probe itself caused
withdrawn and recorded as not measured (issue 30).

    python tools/import_device_shards.py SHARD.json [SHARD.json ...] [--modes-not-reached REASON]

A cell whose error says that the program's tensors were on different devices was caused by the probe (before
the default-device context, a program's own constants were made on the CPU beside inputs on the accelerator):
it is withdrawn (:func:`kinkcheck.shards.withdraw`) and the next probe of the environment measures it. With
``--modes-not-reached``, the framework's modes that the shard lacks are recorded as not measured with that
reason. Nothing else in a shard changes.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from kinkcheck.frameworks.base import FRAMEWORK_MODES
from kinkcheck.shards import ShardError, not_measured_modes, read_shard, withdraw, write_shard

ROOT = Path(__file__).resolve().parent.parent
#: What PyTorch says when one call gets tensors of two devices (``aten`` device checks and ``segment_reduce``'s).
MIXED = re.compile(r"Expected all tensors to be on the same device|get_device\(\) == \w+\.get_device\(\)")
PROBE_REASON = ("not measured: the probe of kinkcheck 2d3abce built this program's own constants on the CPU beside "
                "its inputs on {device}, and PyTorch refused the mix (\"Expected all tensors to be on the same "
                "device\"): the probe's error, not the framework's; re-measure on a {device} device (the probe now "
                "makes a program's tensors on the device probed)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shards", nargs="+", type=Path)
    ap.add_argument("--modes-not-reached", metavar="REASON", help="why the modes the shard lacks were not measured")
    ap.add_argument("--out", type=Path, default=ROOT / "references" / "observations")
    args = ap.parse_args(argv)
    for path in args.shards:
        try:
            shard = read_shard(path)
        except ShardError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        env = shard["environment"]
        n = len(shard["observations"])
        if any(MIXED.search(o.get("error") or "") for o in shard["observations"]):
            shard = withdraw(shard, lambda o: bool(MIXED.search(o.get("error") or "")),
                             PROBE_REASON.format(device=env["device"].upper()))
        lacking = [m for m in FRAMEWORK_MODES[env["framework"]] if m not in (env.get("modes") or ())]
        if args.modes_not_reached and lacking:
            shard = not_measured_modes(shard, lacking, args.modes_not_reached)
        write_shard(args.out / path.name, shard)
        print(f"{env['id']}: {n} observations, {n - len(shard['observations'])} withdrawn; "
              f"{len(shard['environment'].get('not_measured_parts') or [])} part(s) not measured -> "
              f"{args.out / path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
