"""The harness: runs an experiment and records every trial.

A spec (``spec``) is expanded into tests and planned into runs (``plan``: the fixed order
and seeded random permutations); the engine (``engine``) executes each run after a reset on
every worker through an executor (``executors``: local processes or SSH), reads each
trial's metrics (``measure``), keeps secrets out of what it stores (``secrets``), watches the
environment (``environment``) and writes every trial to the store (``washout.data.store``).
"""
