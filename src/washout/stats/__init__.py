"""Statistics of order effects: pure functions over the long format, returning plain data."""
