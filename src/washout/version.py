"""washout's version: one definition, read by the package, the store's provenance, the
reports and the build (pyproject's dynamic version). Kept in a module of its own, importing
nothing, so any layer can name it without importing the package's API."""

__version__ = "0.1.0"
