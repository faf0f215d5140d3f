"""The judge: shards → the typed report (:mod:`kinkcheck.report.model`). :mod:`~kinkcheck.judge.build` judges every
observation against the oracles (labels, conformance), one shard at a time, each shard's judgement kept under its
content and the judging code, and assembles the report; :mod:`~kinkcheck.judge.sections` derives its sections
(disagreements, changed in, coverage, the summary). Nothing here writes a file: :mod:`kinkcheck.render` does.
"""
