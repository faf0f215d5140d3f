"""``python -m kinkcheck.answers.explain``: the judgement worker (:func:`kinkcheck.answers.explain._worker`)."""

import sys

from kinkcheck.answers.explain import _worker

sys.exit(_worker())
