"""Records: the data that flows one way, scenario -> case -> observation -> verdict -> result.

The bottom layer: these modules import nothing of crashmatrix above them (tests/unit/
test_architecture.py keeps it so), so renderers, the verifier and plugins can depend on them alone.

    case         Case, CrashStep: a scenario plus a crash schedule, and their stable ids
    events       ProbeEvent: what an agent reported at one boundary
    transcript   the canonical transcript an adapter reads any agent's store into
    observation  what one case observed: incarnations, their events, requests, files
    violation    InvariantId and Violation: the verdict's evidence
    results      CaseResult and Verdict, and the results.jsonl file
    run_record   run.json: the options, the expected cases, and whether the results are complete
    atomic       replacing a file atomically (results.jsonl of a merge, run.json)
    evidence     a failing case's evidence for the reports, deterministic and clipped
    clip         cutting long text and long lists: one rule for records and reports
    redact       taking the values of secret-looking environment variables out of text
    output_tail  the last lines an incarnation printed, made fit for a failing case's result
    fs_calls     FsCall: one file-system call of an incarnation, as strace observed it
    tree_image   TreeImage: a folder's files and folders at one moment, bytes and all
"""
