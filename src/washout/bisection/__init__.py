"""``washout bisect``: find the commit that changed a metric, each step an order-aware
experiment (docs/bisect.md).

- :mod:`~washout.bisection.git`: revisions, the first-parent history, worktrees (I/O);
- :mod:`~washout.bisection.build`: a commit built once in its own worktree, with its log and
  the hashes of every file (I/O);
- :mod:`~washout.bisection.stepspec`: the experiment of one step, written as a washout spec (pure);
- :mod:`~washout.bisection.deploy`: the builds on every worker, checked against their hashes;
- :mod:`~washout.bisection.state`: the bisect's durable state (its directory, one writer);
- :mod:`~washout.bisection.search`: where the search stands and which commit to test next (pure);
- :mod:`~washout.bisection.summary`: the state read as an answer (pure);
- :mod:`~washout.bisection.driver`: the loop: build, measure, decide, until an honest ending;
- :mod:`~washout.bisection.result`: the typed result (``to_dict``/``from_dict``).
"""
