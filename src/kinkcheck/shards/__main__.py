"""``python -m kinkcheck.shards``: write ``schemas/shard.v2.json`` from the shard's schema (:func:`file_schema`)."""

import json
from pathlib import Path

from kinkcheck.shards import file_schema

if __name__ == "__main__":
    out = Path(__file__).resolve().parents[1] / "schemas" / "shard.v2.json"
    out.write_text(json.dumps(file_schema(), indent=1) + "\n", encoding="utf-8")
    print(f"{out}: written")
