"""``python -m kinkcheck`` = the ``kinkcheck`` command."""

from kinkcheck.cli import main

raise SystemExit(main())
