"""Framework folders outside kinkcheck, laid out as ``src/kinkcheck/frameworks/<name>/`` (see ``tests/test_registry.py``):
``fakefw/`` is the folder of the fake framework ``tests/fakefw``."""
