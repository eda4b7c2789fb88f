"""Renderers: pure functions from case results to text (terminal, Markdown, JUnit XML, HTML)."""
