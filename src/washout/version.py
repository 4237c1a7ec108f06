"""washout's version, in a module of its own so that the layers can name it without importing
the package's public API (which imports them)."""

__version__ = "0.1.0"
