"""LangGraph apps hosted unmodified: `crashmatrix run --agent langgraph` (extra: `crashmatrix[langgraph]`).

`adapter` tells the harness how to start and restart the host; `host` is the program it runs
(imports the user's graph factory, installs the seams, invokes the graph as LangGraph documents);
`seams` turns LangGraph's callbacks and checkpointer writes into probe events; `store` reads the
`SqliteSaver` database into commits and the canonical transcript.
"""
