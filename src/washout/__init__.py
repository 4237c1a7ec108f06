"""washout: order-aware systems performance experiments.

Runs experiments that avoid the ordering trap (Duplyakin et al., USENIX ATC 2023), tells
whether the order of trials changed the results and why, and evaluates a system across
its parameter space with incremental sampling (Hui et al., SIGMOD 2024).
"""

__version__ = "0.1.0"
