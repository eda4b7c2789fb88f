"""Execution: processes, files and clocks, at the edge of the pure core.

    spawn          the launch, process and spawner contract
    fresh          a new interpreter per incarnation
    zygote         the harness side of the zygote (fork mode); zygote_server is the process
    spawners       picks one for a spawn mode
    incarnation    one agent process on the probe channel: step, kill, reap
    runner         one case: incarnations under the crash schedule, faults applied, settle run
    incarnation_command  `run TASK` until the task is in the store, then `recover`
    call_steps     how an incarnation is spawned for its step (strace or not), what its trace says
    call_outcomes  after a kill at a call or an injected call: did it land; then the fault
    freezer        what a FREEZE fault is handed: the frozen incarnation, a second one beside it
    case_start     a case begun from a crash state, and the capture of those states (--states)
    states_tally   what --states did per scenario: points, distinct states, real kills and why
    shared_tail    what a shared recovery produced, spliced into each case's own observation
    session_files  what the harness reads of a session directory itself (commits, any byte)
    output_cap     an incarnation's output kept within bounds, and its end read back
    matrix         a whole matrix: record, enumerate, run, go deeper
    arrivals       --arrivals: the runs each input's and cancel's points are read from
    scratch        where case trees live (tmpfs when it can), and the sweep of dead ones
    workspace_files  what a case's workspace holds, read without following links
    stop_signals   SIGINT and SIGTERM: the one way a command installs its handler; a case dropped
    subreaper      the command adopts what agents leave running, and ends it when it ends
    covered, line_coverage   --line-coverage of the recovery incarnations
    fs_trace       strace's command line, and its output parsed into file-system call records
    observed       an incarnation under strace, with an image of its session taken first
"""
