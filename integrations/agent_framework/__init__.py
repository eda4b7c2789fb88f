"""Agent Framework apps hosted unmodified: `crashmatrix run --agent microsoft-agent-framework`.

(extra: `crashmatrix[microsoft-agent-framework]`.) `adapter` tells the harness how to start and
restart the host; `host` is the program it runs (imports the user's workflow factory, installs
the seams, runs the workflow with a `FileCheckpointStorage` in the session directory and resumes
it from its latest checkpoint after a crash); `seams` turns tool invocations, model calls and
checkpoint saves into probe events; `store` reads the checkpoint files into commits and the
canonical transcript.
"""
