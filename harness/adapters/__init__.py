"""Agent adapters: the contract (`interface`), the registry, and the built-in adapters.

Built-ins, registered in pyproject.toml exactly as a third party registers its own:
`durable` (our agent in `crashmatrix.agent`), `baseline` (the messages-only baseline: history
persisted, no recovery rules) and `mutant` (our agent with one catalogued fault patched in).
"""
