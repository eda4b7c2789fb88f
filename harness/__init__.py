"""The harness: runs an agent under a crash schedule, observes it, and judges what it saw.

Data flows one way: scenario -> case -> execution -> observation -> verdict -> result -> renderers.
Each folder is one role (tests/unit/test_architecture.py keeps the layers):

    records/      the data that flows (bottom layer: imports nothing above it)
    adapters/     how to start, restart, feed and read an agent; registered by entry point
    faults/       fault kinds: where each is enumerated, what it does, what it needs
    verify/       the invariants, one module each; pure
    enumeration   crash schedules from recorded traces; pure
    evaluate      observation -> verdict -> case result; pure
    execution/    processes, the zygote, the case runner and the matrix
    explore/      Hypothesis-generated scenarios and schedules, shrinking, repro files
    mutants/      faulty variants of our agent that the matrix must kill
    plugins       the extension-point mechanism (entry-point groups)
    cli/          the command line and the pytest plugin
"""
