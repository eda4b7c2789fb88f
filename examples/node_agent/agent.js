// A small durable Node agent for crashmatrix: one JSON line per commit, intent before effect, "unknown" after a crash.
//
//   node agent.js run SESSION WORKSPACE PROVIDER_URL TOOLS TASK
//   node agent.js recover SESSION WORKSPACE PROVIDER_URL TOOLS
//
// The Node twin of examples/toy_agent/toyagent/agent.py. No npm dependencies: node:http for the
// provider, synchronous fs for the store (a crash lands between two statements, never inside an
// asynchronous write we cannot see), node:child_process for `bash`.
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const http = require("node:http");
const os = require("node:os");
const { spawnSync } = require("node:child_process");
// The probe client, as the repository lays it out; another project copies the one file next to it.
const { probe, ProbeDetached } = require(path.join(__dirname, "..", "..", "clients", "js", "crashmatrix-probe.js"));

// Must contain the fake provider's unknown-outcome marker ("outcome is unknown"), so the scripted
// model sees "unknown", not "error", and checks before acting again.
const UNKNOWN = "ERROR: the outcome is unknown (the agent crashed while it ran); check before retrying";
const PROVIDER_TIMEOUT_MS = 30000;
const BASH_TIMEOUT_MS = 120000; // as crashmatrix/agent/tools.py

// ---- the store: a JSON-lines log, one line per commit -------------------------------------

function load(log) {
  if (!fs.existsSync(log)) return [];
  return fs.readFileSync(log, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
}

/** Append one entry as one line; the probes around it are where crashes land. */
function commit(log, entry, seq) {
  const detail = { seq }; // the entry's 1-based line number, as the protocol asks
  const label = labelOf(entry);
  probe("commit.before", label, detail);
  const fd = fs.openSync(log, "a");
  try {
    fs.writeSync(fd, `${JSON.stringify(entry)}\n`);
    probe("commit.written", label, detail);
    fs.fsyncSync(fd); // durable before we act on it: the next step may be an effect
  } finally {
    fs.closeSync(fd);
  }
  probe("commit.after", label, detail);
}

/** A commit's label: deterministic and specific, since labels end up in case ids. */
function labelOf(entry) {
  if (entry.type === "message") return `message.${entry.message.role}`;
  if (entry.type === "started") return `started.${entry.tool}`;
  return entry.type;
}

// ---- the tools: the same names, schemas and result texts as crashmatrix/agent/tools.py --------

class ToolError extends Error {} // shown to the model as "ERROR: ...", never a crash of the agent

const schema = (props) => ({
  type: "object",
  properties: Object.fromEntries(Object.entries(props).map(([k, t]) => [k, { type: t }])),
  required: Object.keys(props),
  additionalProperties: false,
});

const TOOLS = {
  read: { description: "Read a UTF-8 text file in the workspace.", parameters: schema({ path: "string" }), fn: read },
  append_note: { description: "Append one line to a file in the workspace.",
    parameters: schema({ path: "string", line: "string" }), fn: appendNote },
  bash: { description: "Run a shell command in the workspace.", parameters: schema({ command: "string" }), fn: bash },
};

const spec = (name) => ({ type: "function", function: { name, description: TOOLS[name].description, parameters: TOOLS[name].parameters } });

// Python's type names, so argument errors read as the Python agent's do.
const pyType = (v) => (v === null ? "NoneType" : Array.isArray(v) ? "list" : typeof v === "string" ? "str"
  : typeof v === "boolean" ? "bool" : typeof v === "number" ? (Number.isInteger(v) ? "int" : "float") : "dict");
const JSON_TYPES = { string: "str", integer: "int", number: "float", boolean: "bool", object: "dict", array: "list" };
const fitsType = (want, v) => (want === "number" ? pyType(v) === "int" || pyType(v) === "float" : pyType(v) === JSON_TYPES[want]);
const pyRepr = (s) => `'${String(s).replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

function checkArgs(name, args) {
  const { properties, required } = TOOLS[name].parameters;
  if (pyType(args) !== "dict") throw new ToolError(`${name}: arguments must be a JSON object, got ${pyType(args)}`);
  for (const key of required) if (!(key in args)) throw new ToolError(`${name}: missing required argument ${pyRepr(key)}`);
  for (const [key, value] of Object.entries(args)) {
    if (!(key in properties)) throw new ToolError(`${name}: unknown argument ${pyRepr(key)}`);
    if (!fitsType(properties[key].type, value)) throw new ToolError(`${name}: argument ${pyRepr(key)} must be ${properties[key].type}`);
  }
}

/** Like Python's Path.resolve(): follow the symlinks of the part that exists. */
function resolveLoose(p) {
  try {
    return fs.realpathSync(p);
  } catch {
    const parent = path.dirname(p);
    return parent === p ? p : path.join(resolveLoose(parent), path.basename(p));
  }
}

/** `rel` inside the workspace, refusing anything that escapes it (symlinks too). */
function confine(workspace, rel) {
  const root = resolveLoose(path.resolve(workspace));
  const target = resolveLoose(path.resolve(root, rel));
  if (target !== root && !target.startsWith(root + path.sep)) throw new ToolError(`path ${pyRepr(rel)} is outside the workspace`);
  return target;
}

function read(ws, args) {
  const file = confine(ws, args.path);
  let bytes;
  try {
    bytes = fs.readFileSync(file);
  } catch (err) {
    if (err.code === "ENOENT") throw new ToolError(`${args.path}: no such file`);
    if (err.code === "EISDIR") throw new ToolError(`${args.path}: cannot read (IsADirectoryError)`);
    throw err;
  }
  try {
    return { content: new TextDecoder("utf-8", { fatal: true }).decode(bytes) }; // strict, as Python's read_text
  } catch {
    throw new ToolError(`${args.path}: cannot read (UnicodeDecodeError)`);
  }
}

function appendNote(ws, args) {
  const file = confine(ws, args.path);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.appendFileSync(file, `${String(args.line).replace(/\n+$/, "")}\n`, "utf8");
  return { content: `appended 1 line to ${args.path}` };
}

function bash(ws, args) {
  // Node 20's libuv closes every descriptor above stdio in the child, so the probe pipes do not
  // leak into the command (a leaked W would delay the harness's end-of-file).
  const proc = spawnSync("/bin/sh", ["-c", args.command], {
    cwd: ws, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: BASH_TIMEOUT_MS, maxBuffer: 1 << 30,
  });
  if (proc.error && proc.error.code === "ETIMEDOUT") throw new ToolError(`command timed out after ${BASH_TIMEOUT_MS / 1000}s`);
  if (proc.error) throw proc.error;
  // Killed by a signal: Python's returncode is minus the signal number.
  const code = proc.status !== null ? proc.status : -(os.constants.signals[proc.signal] || 0);
  let out = `exit code ${code}\n${proc.stdout}`;
  if (proc.stderr) out += `\n[stderr]\n${proc.stderr}`;
  // As the Python tool: a nonzero exit is flagged is_error, but the text carries no "ERROR: "
  // prefix, so the fake provider reads it as the command's (failed) output, not a tool failure.
  return { content: out, isError: code !== 0 };
}

/** Run a tool; every expected failure becomes an "ERROR: ..." result, as Python's `invoke`. */
function invoke(name, workspace, args) {
  try {
    checkArgs(name, args);
    return TOOLS[name].fn(workspace, args);
  } catch (err) {
    if (err instanceof ProbeDetached) throw err;
    if (err instanceof ToolError) return { content: `ERROR: ${err.message}`, isError: true };
    if (err && typeof err.code === "string" && typeof err.syscall === "string") { // an OSError in Python
      const strerror = err.message.replace(/^[A-Z]+: /, "").replace(/, .*$/s, "");
      return { content: `ERROR: ${name}: ${strerror.charAt(0).toUpperCase()}${strerror.slice(1)}`, isError: true };
    }
    throw err;
  }
}

// ---- the provider --------------------------------------------------------------------------

/** POST the history to {url}/chat/completions (OpenAI chat format) and return the reply message. */
async function ask(url, messages, tools) {
  const body = Buffer.from(JSON.stringify({ model: "node-agent", messages, tools: tools.map(spec) }), "utf8");
  probe("provider.before", "chat", { messages: messages.length });
  let reply;
  try {
    reply = await new Promise((resolve, reject) => {
      const req = http.request(`${url}/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "Content-Length": body.length },
        timeout: PROVIDER_TIMEOUT_MS,
      }, (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          if (res.statusCode !== 200) return reject(new Error(`http ${res.statusCode}: ${text.slice(0, 200)}`));
          try {
            resolve(JSON.parse(text).choices[0].message);
          } catch (err) {
            reject(new Error(`unreadable reply: ${err.message}`));
          }
        });
      });
      req.on("timeout", () => req.destroy(new Error("timeout")));
      req.on("error", reject);
      req.end(body);
    });
  } catch (err) {
    probe("provider.after", "error", { reason: err.message });
    throw err; // no retries in this small agent: the run fails (exit 1)
  }
  probe("provider.after", "reply", { tool_calls: (reply.tool_calls || []).length });
  return reply;
}

// ---- the loop ------------------------------------------------------------------------------

/**
 * The store as crashmatrix's canonical transcript (its store-dump format, docs/architecture.md):
 * what `node_adapter.STORED` reads instead of a store reader written in Python. One commit per
 * log line, numbered as the commit probes number them.
 */
function dump(session) {
  const entries = load(path.join(session, "log.jsonl"));
  const doneAt = entries.findIndex((e) => e.type === "done");
  const out = { format: 1, commits: entries.length, labels: {}, messages: [], runs: [], starts: [] };
  entries.forEach((e, i) => {
    const seq = i + 1;
    out.labels[seq] = labelOf(e);
    if (e.type === "started") out.starts.push({ seq, run_id: "run-1", call_id: e.call_id, tool: e.tool });
    if (e.type !== "message") return;
    const m = e.message;
    out.messages.push({
      seq, run_id: "run-1", role: m.role, content: m.content === undefined ? null : m.content,
      calls: (m.tool_calls || []).map((c) => ({ call_id: c.id, tool: c.function.name, arguments: c.function.arguments })),
      ...(m.tool_call_id ? { call_id: m.tool_call_id } : {}),
      ...(e.is_error ? { is_error: true } : {}),
      ...(m.content === UNKNOWN ? { recovered: "unknown" } : {}), // written by recovery, not by the tool
    });
  });
  if (entries.length) {
    out.runs.push({ run_id: "run-1", seq: 1, ...(doneAt >= 0 ? { outcome: "completed", finished_seq: doneAt + 1 } : {}) });
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
  return 0;
}

async function main(argv) {
  const [command, session, workspace, url, toolList, task] = argv;
  if (command === "dump" && session) return dump(session);
  if (!["run", "recover"].includes(command) || !toolList || (command === "run" && task === undefined)) {
    process.stderr.write("usage: node agent.js run SESSION WORKSPACE URL TOOLS TASK | recover SESSION WORKSPACE URL TOOLS | dump SESSION\n");
    return 2;
  }
  const tools = toolList.split(",");
  const unknownTools = tools.filter((t) => !(t in TOOLS));
  if (unknownTools.length) {
    process.stderr.write(`unknown tool(s): ${unknownTools.join(", ")}; known: ${Object.keys(TOOLS).join(", ")}\n`);
    return 2;
  }
  const log = path.join(session, "log.jsonl");
  fs.mkdirSync(session, { recursive: true });
  let entries = load(log);
  if (command === "run" && entries.length === 0) {
    commit(log, { type: "message", message: { role: "user", content: task } }, 1);
  } else if (entries.length === 0 || entries.some((e) => e.type === "done")) {
    return 0; // nothing was started, or a finished run stays finished: no request, no effect
  }
  for (;;) {
    entries = load(log);
    const put = (entry) => commit(log, entry, entries.push(entry)); // seq = the new line's number
    const messages = entries.filter((e) => e.type === "message").map((e) => e.message);
    // Only what happened since the model last asked counts: providers reuse call ids across
    // turns, so an older result or intent with the same id must not answer a new call.
    const cut = entries.findLastIndex((e) => e.type === "message" && e.message.role === "assistant");
    const window = entries.slice(cut + 1);
    const started = new Set(window.filter((e) => e.type === "started").map((e) => e.call_id));
    const answered = new Set(window.filter((e) => e.type === "message").map((e) => e.message.tool_call_id));
    // The calls still owed a result: those of the latest assistant message (a tool result may
    // close only part of its batch).
    const asked = cut >= 0 ? entries[cut].message : undefined;
    const pending = !asked ? [] : (asked.tool_calls || []).filter((c) => !answered.has(c.id));
    for (const c of pending) {
      const name = c.function.name;
      if (started.has(c.id)) {
        // Intent without result: the effect may or may not have happened. Never re-run it;
        // say so, and let the model check.
        put({ type: "message", message: { role: "tool", tool_call_id: c.id, content: UNKNOWN }, is_error: true });
        continue;
      }
      let args;
      try {
        args = JSON.parse(c.function.arguments);
      } catch {
        args = undefined;
      }
      if (!tools.includes(name) || args === undefined) {
        const why = !tools.includes(name) ? `unknown tool ${pyRepr(name)}` : "arguments are not valid JSON";
        put({ type: "message", message: { role: "tool", tool_call_id: c.id, content: `ERROR: ${why}` } });
        continue;
      }
      put({ type: "started", call_id: c.id, tool: name }); // intent first, always
      probe("effect.before", name, { call_id: c.id }); // which call: the verifier pairs them
      const result = invoke(name, workspace, args);
      probe("effect.after", name, { call_id: c.id });
      put({ type: "message", message: { role: "tool", tool_call_id: c.id, content: result.content },
        ...(result.isError ? { is_error: true } : {}) });
    }
    if (pending.length) continue;
    const last = messages[messages.length - 1];
    if (last.role === "assistant") { // the final answer is saved; only its "done" was lost
      put({ type: "done" });
      return 0;
    }
    const reply = await ask(url, messages, tools);
    put({ type: "message", message: reply });
    if (!(reply.tool_calls || []).length) {
      put({ type: "done" });
      return 0;
    }
  }
}

if (require.main !== module) {
  module.exports = { invoke, TOOLS, UNKNOWN }; // required (e.g. to try a tool): run nothing
} else {
  main(process.argv.slice(2)).then(
    (code) => { process.exitCode = code; },
    (err) => {
      // Detached: the harness is gone, take no further step (3, as durable-agent). Anything else
      // fails the run visibly (1).
      process.exitCode = err instanceof ProbeDetached ? 3 : 1;
      if (!(err instanceof ProbeDetached)) process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
    },
  );
}
