"""The one analysis of a source and its typed result (docs/design.md, "The analysis").

:func:`washout.analysis.compute.analyze` computes everything a source supports into a
frozen :class:`washout.analysis.result.Analysis`; every output washout writes is rendered
from that result (:mod:`washout.report`). ``units`` says how values are written,
``parallel`` runs work beside other work on another core.
"""
