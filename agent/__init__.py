"""A durable agent loop: a session log of commits, recovery rules, tools and probes."""

__version__ = "0.1.0"
