"""``python -m kinkcheck.explain``: the judgement worker (:func:`kinkcheck.explain._worker`)."""

import sys

from kinkcheck.explain import _worker

sys.exit(_worker())
