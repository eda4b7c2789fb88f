// The graph: a chat model that calls tools until it answers, with LangGraph.js's own ToolNode loop.
//
// Nothing here knows about crashmatrix. The model is `ChatOpenAI`, which takes its server from
// `OPENAI_BASE_URL` (crashmatrix points it at its fake provider); the tools act on the current
// directory. `build(checkpointer)` is the factory the host calls: it compiles the graph with the
// checkpointer it is given, as an app would compile it with its own `SqliteSaver`.
import { appendFileSync, readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode, toolsCondition } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

const OUTPUT_CAP = 16_000; // characters of a command's output the model is shown

export const read = tool(({ path }) => readFileSync(path, "utf8"), {
  name: "read",
  description: "Read a text file and return its contents.",
  schema: z.object({ path: z.string().describe("The file to read, relative to the working directory.") }),
});

export const appendNote = tool(({ path, line }) => {
  appendFileSync(path, `${line.replace(/\n+$/, "")}\n`, "utf8");
  return `appended 1 line to ${path}`;
}, {
  name: "append_note",
  description: "Append one line to a text file (not idempotent: calling it twice appends twice).",
  schema: z.object({
    path: z.string().describe("The file to append to."),
    line: z.string().describe("The line to append, without a line break."),
  }),
});

export const bash = tool(({ command }) => {
  const done = spawnSync("/bin/sh", ["-c", command], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 });
  return `exit code ${done.status}\n${(done.stdout + done.stderr).slice(-OUTPUT_CAP)}`;
}, {
  name: "bash",
  description: "Run a shell command and return its exit code and output.",
  schema: z.object({ command: z.string().describe("The command line, run by /bin/sh.") }),
});

export const TOOLS = [read, appendNote, bash];

/** The compiled graph: `agent` asks the model, `tools` runs the calls it asked for. */
export function build(checkpointer) {
  const model = new ChatOpenAI({ model: "gpt-4o-mini", temperature: 0 }).bindTools(TOOLS);
  const agent = async (state) => ({ messages: [await model.invoke(state.messages)] });
  return new StateGraph(MessagesAnnotation)
    .addNode("agent", agent)
    .addNode("tools", new ToolNode(TOOLS))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", toolsCondition)
    .addEdge("tools", "agent")
    .compile({ checkpointer });
}
