// The agent: instructions and three function tools, nothing that knows about crashmatrix.
//
// Written as the OpenAI Agents SDK (JS) documents an agent: `new Agent({name, instructions,
// tools})` with `tool({...})` function tools. The model is the SDK's default OpenAI client, which
// takes its server from OPENAI_BASE_URL and speaks the Responses API; the tools act on the
// current directory. A service would run it with
// `run(build(), message, { session: openSession(dir) })` (session.mjs).
import { appendFileSync, readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { Agent, tool } from "@openai/agents";
import { z } from "zod";

export { openSession } from "./session.mjs";

const OUTPUT_CAP = 16_000; // characters of a command's output the model is shown

const read = tool({
  name: "read",
  description: "Read a text file and return its contents.",
  parameters: z.object({ path: z.string().describe("The file to read, relative to the working directory.") }),
  execute: async ({ path }) => readFileSync(path, "utf8"),
});

const appendNote = tool({
  name: "append_note",
  description: "Append one line to a text file (not idempotent: calling it twice appends twice).",
  parameters: z.object({
    path: z.string().describe("The file to append to."),
    line: z.string().describe("The line to append, without a line break."),
  }),
  execute: async ({ path, line }) => {
    appendFileSync(path, `${line.replace(/\n+$/, "")}\n`, "utf8");
    return `appended 1 line to ${path}`;
  },
});

const bash = tool({
  name: "bash",
  description: "Run a shell command and return its exit code and output.",
  parameters: z.object({ command: z.string().describe("The command line, run by /bin/sh.") }),
  execute: async ({ command }) => {
    const done = spawnSync("/bin/sh", ["-c", command], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 });
    return `exit code ${done.status}\n${(done.stdout + done.stderr).slice(-OUTPUT_CAP)}`;
  },
});

/** The agent: keeps CHANGELOG.md and runs the project's tests. */
export function build() {
  return new Agent({
    name: "changelog",
    instructions: "You keep the project's CHANGELOG.md and run its tests. Use the tools; report what you did.",
    model: "gpt-4o-mini",
    tools: [read, appendNote, bash],
  });
}
