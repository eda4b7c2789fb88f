"""crashmatrix: kill a durable agent at every commit boundary, restart it, verify its promises.

The one import name everything installed lives under. The code sits in the repository's
top-level folders; this package links them in (one symlink each), so a checkout, the wheel,
mypy and an editor all see the same module names:

    crashmatrix.agent      the reference durable agent (session log, recovery rules, tools, probes)
    crashmatrix.fakes      test doubles shipped as product: the scripted fake LLM provider
    crashmatrix.scenarios  the scenario model, its loader and JSON Schema, the built-in scenarios
    crashmatrix.harness    records, adapters, faults, execution, verification, CLI
    crashmatrix.reports    renderers: pure functions from case results to text

Importing this package imports nothing else (agents are forked from a zygote that imports
only what it runs).
"""
