"""Renderings of analysis results: terminal tables, HTML, Markdown, figures."""
