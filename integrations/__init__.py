"""Hosts for agents built on third-party frameworks, run unmodified under the crash matrix.

Each subpackage (`langgraph`, ...) is an adapter, a host program the harness starts as the agent,
the seams that turn the framework's own boundaries (tool runs, model calls, store writes) into
probe events without editing framework code, and a reader of the framework's store into the
canonical transcript. Each needs its framework installed (an optional extra:
`pip install 'crashmatrix[langgraph]'`); nothing else in crashmatrix imports them.
"""
