"""Extensive evaluation at a fraction of the cost (Hui et al., SIGMOD 2024).

space.py (parameters, levels, settings), samplers.py (which settings next), anova.py (the
paper's OLS/Type-III/backward elimination, fast), models.py (predictors for validation),
incremental.py (the sampling loop and its termination rules), points.py (knee and turning
points), conclusions.py (terms, ranked points, fair ranges, comparison with the full data),
explore.py (the loop on a measured CSV and its result), result.py (the frozen results a sweep
returns), spec.py and runner.py (``[sweep]`` specs run through the engine).
"""
