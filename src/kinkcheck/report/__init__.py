"""The report: its typed model and every reader of it. :mod:`kinkcheck.report.model` (the one read API: the typed
report of ``conventions.json.gz``, re-exporting :mod:`~kinkcheck.report.records` and :mod:`~kinkcheck.report.derived`),
:mod:`~kinkcheck.report.dataset` (``observations.parquet``: written and read), :mod:`~kinkcheck.report.cells` (the
report read for a program in any spelling), :mod:`~kinkcheck.report.text` (the words, marks and anchors every page and
face shares), :mod:`~kinkcheck.report.schema` (the JSON schema of the model).

The judge (:mod:`kinkcheck.judge`) fills the model from shards; the render (:mod:`kinkcheck.render`) writes its files
and pages; the faces read it. Importing this package imports none of its modules.
"""
