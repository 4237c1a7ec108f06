"""Readers that turn other tools' result files into washout's long format."""
