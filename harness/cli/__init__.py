"""Front ends: the `crashmatrix` command and the pytest plugin, the only layer that imports both
execution and renderers.

    main           the click group, `fake-provider`, and where every command is registered
    run            run (and registers list, repro, report with it)
    list_cmd, repro  `crashmatrix list` and `crashmatrix repro`
    common_options the options run, list and repro share; the checked --fault choice
    merge, compare, durability, baseline_cmd   the commands of those names
    report         regenerate reports from saved results; branch coverage
    schema         the JSON Schema of scenario files
    bench, explore, mutants   the commands of the same names (bench_memory: `bench --memory-cases`)
    pytest_plugin  `pytest --crashmatrix`
    exitcodes, progress       shared by the commands
"""
