"""LangGraph.js apps hosted unmodified: `crashmatrix run --agent langgraph-js` (Node, the app's npm packages).

`adapter` tells the harness how to start and restart the host; `host.mjs` is the Node program it
runs (loads the user's graph factory from the user's project, installs the seams, invokes the
graph as LangGraph.js documents); `store` reads the JS `SqliteSaver` database into commits and
the canonical transcript; `node` is what a Node-hosted adapter shares (also used by
`openai_agents_js`). Nothing here imports a framework: the framework is JavaScript.
"""
