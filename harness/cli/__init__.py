"""Front ends: the `crashmatrix` command and the pytest plugin, the only layer that imports both
execution and renderers.

    main           the click group, `fake-provider`, and where every command is registered
    run            run, list, repro, merge
    report         regenerate reports from saved results; branch coverage
    schema         the JSON Schema of scenario files
    bench, explore, mutants   the commands of the same names (bench_memory: `bench --memory-cases`)
    pytest_plugin  `pytest --crashmatrix`
    exitcodes, progress       shared by the commands
"""
