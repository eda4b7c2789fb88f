// The program the harness runs as a LangGraph.js agent: the user's graph, unmodified, under probes.
//
//   node --experimental-import-meta-resolve host.mjs [--app FILE:EXPORT] run SESSION WORKSPACE PROVIDER_URL TASK
//   node --experimental-import-meta-resolve host.mjs [--app FILE:EXPORT] recover SESSION WORKSPACE PROVIDER_URL
//   node --experimental-import-meta-resolve host.mjs [--app FILE:EXPORT] describe
//
// `--app` names the user's graph factory, `FILE:EXPORT` (FILE relative to the current directory;
// ESM or CommonJS). The factory is called with the checkpointer; it returns a compiled graph (its
// checkpointer is replaced by the session's) or a StateGraph (the host compiles it). Every
// framework module the host uses (the SQLite checkpointer, LangChain's callback base class) is
// loaded from the app's own project, so host and app share one copy.
//
// The checkpointer is a `SqliteSaver` on SESSION/checkpoints.sqlite; the thread id is kept in
// SESSION/thread_id. `run` invokes the graph with the task as a user message; `recover` invokes
// it with `null` on the same thread, as LangGraph.js documents resuming. Both with
// `durability: "sync"` (each step saved before the next starts) and `maxConcurrency: 1`.
//
// Seams (the probe events):
// - a LangChain callback handler passed in the invocation's config (LangGraph hands it to every
//   node, tool and model run): tools as effect.before/after (label: the tool's name, call_id),
//   chat models as provider.before/after. `awaitHandlers`: LangChain.js otherwise runs handlers
//   in the background, and a probe there would land after the step it reports;
// - the checkpointer's `put` and `putWrites` wrapped: commit.before, commit.written, commit.after
//   with `seq` and a label (`checkpoint.<source>`, `writes.<node>`), numbered as
//   integrations/langgraph_js/store.py reads the database.
//
// `recover` checks first: when the thread's latest checkpoint leaves no task to run (what
// `graph.invoke(null)` would find: nothing to do, no event, exit 0) it ends there, before the
// framework loads (about 0.1 s instead of 1; docs/frameworks.md, "Node start cost"). The check
// reads the database with the better-sqlite3 the app's saver imports, and claims "nothing to do"
// only for a StateGraph's checkpoint it fully understands; anything else takes the framework's
// path, on the connection the check opened. CRASHMATRIX_NODE_CHECK_FIRST=0 always loads first.
//
// Exit codes: 0 the invocation returned (describe: tools printed), 1 it raised, 2 usage,
// 3 the harness closed the probe channel.
import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
// The shipped runtime: clients/js in a checkout (integrations/langgraph_js -> ../../clients/js).
const runtime = require(path.join(here, "..", "..", "clients", "js", "host-runtime.js"));
const { emit, serialiser, loadApp, parseAppRef, describe, main } = runtime;

const APP_ENV = "CRASHMATRIX_LANGGRAPH_JS_APP";
const DEFAULT_APP = path.join(here, "..", "..", "examples", "langgraph_js_app", "graph.mjs") + ":build";
const DB = "checkpoints.sqlite";
const THREAD_FILE = "thread_id";
const INPUT_TASK = "__input__"; // LangGraph's INPUT: the task id of the input's writes derives from it
const PULL = "__pregel_pull";
const CHECK_FIRST_ENV = "CRASHMATRIX_NODE_CHECK_FIRST"; // "0": load the framework before anything
const CHECKPOINT_V = 4; // the checkpoint format the check understands (an older one migrates on load)
const BRANCH = "branch:to:";
const TASKS = "__pregel_tasks"; // Sends waiting to run
const START = "__start__";

function token(text) {
  return String(text).replace(/[^A-Za-z0-9_.-]+/g, "_").replace(/^_+|_+$/g, "") || "none";
}
function checkpointLabel(metadata) {
  return `checkpoint.${token(metadata?.source ?? "none")}`;
}
/** `writes.<node>` for a node's task (its path `~__pregel_pull, NODE`), `writes.input` for the input. */
function writesLabel(taskPath) {
  const parts = String(taskPath ?? "").replace(/^~/, "").split(",").map((p) => p.trim());
  if (parts.length > 1 && parts[0] === PULL) return `writes.${token(parts[1])}`;
  return "writes.task";
}
const checkpointKey = (ns, id) => JSON.stringify(["checkpoint", ns, id]);
const writesKey = (ns, id, task) => JSON.stringify(["writes", ns, id, task]);

/** The thread's commits in the database, in store.py's order: each checkpoint, then the writes saved on it. */
function existingCommits(db, threadId) {
  const haveTables = db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name IN ('checkpoints', 'writes')").get().n === 2;
  if (!haveTables) return [];
  const checkpoints = db.prepare("SELECT checkpoint_ns AS ns, checkpoint_id AS id FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id, checkpoint_ns").all(threadId);
  const writes = db.prepare("SELECT checkpoint_ns AS ns, checkpoint_id AS id, task_id AS task FROM writes WHERE thread_id = ? ORDER BY rowid").all(threadId);
  const anchored = new Map();
  for (const w of writes) {
    const anchor = JSON.stringify([w.ns, w.id]);
    const list = anchored.get(anchor) ?? [];
    const key = writesKey(w.ns, w.id, w.task);
    if (!list.includes(key)) list.push(key);
    anchored.set(anchor, list);
  }
  const keys = [];
  for (const c of checkpoints) {
    keys.push(checkpointKey(c.ns, c.id));
    const anchor = JSON.stringify([c.ns, c.id]);
    keys.push(...(anchored.get(anchor) ?? []));
    anchored.delete(anchor);
  }
  for (const list of anchored.values()) keys.push(...list); // writes without their checkpoint: last
  return keys;
}

/** Probe every put and putWrites of this checkpointer (one instance's methods, set before the graph runs). */
function wrapSaver(saver, existing) {
  const seqs = new Map(existing.map((k, i) => [k, i + 1]));
  const seqOf = (key) => {
    if (!seqs.has(key)) seqs.set(key, seqs.size + 1);
    return seqs.get(key);
  };
  const serialised = serialiser();
  const commit = (key, label, write) => serialised(async () => {
    const seq = seqOf(key);
    emit("commit.before", label, { seq });
    const out = await write(); // an exception skips the events after it (it never landed)
    emit("commit.written", label, { seq });
    emit("commit.after", label, { seq });
    return out;
  });
  const put = saver.put.bind(saver);
  const putWrites = saver.putWrites.bind(saver);
  saver.put = (config, checkpoint, metadata, newVersions) => {
    const ns = String(config?.configurable?.checkpoint_ns ?? "");
    return commit(checkpointKey(ns, String(checkpoint.id)), checkpointLabel(metadata),
      () => put(config, checkpoint, metadata, newVersions));
  };
  saver.putWrites = (config, writes, taskId, taskPath) => {
    const conf = config?.configurable ?? {};
    const label = taskId === INPUT_TASK || !taskPath ? inputOrTask(conf, taskId) : writesLabel(taskPath);
    return commit(writesKey(String(conf.checkpoint_ns ?? ""), String(conf.checkpoint_id), String(taskId)), label,
      () => putWrites(config, writes, taskId, taskPath));
  };
}

// LangGraph saves the input's writes under uuid5("__input__", checkpoint id), with no task path.
function inputOrTask(conf, taskId) {
  return uuid5(INPUT_TASK, String(conf.checkpoint_id)) === taskId ? "writes.input" : "writes.task";
}

// UUID version 5 (RFC 9562), as @langchain/langgraph-checkpoint computes task ids.
function uuid5(name, namespace) {
  const ns = Buffer.from(namespace.replace(/-/g, ""), "hex");
  const hash = require("node:crypto").createHash("sha1").update(ns).update(Buffer.from(name, "utf8")).digest();
  hash[6] = (hash[6] & 0x0f) | 0x50;
  hash[8] = (hash[8] & 0x3f) | 0x80;
  const h = hash.subarray(0, 16).toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** Tool runs and chat-model calls as effect and provider events (a class of the app's own LangChain). */
function probeHandler(BaseCallbackHandler) {
  return class ProbeHandler extends BaseCallbackHandler {
    name = "crashmatrix_probes";
    awaitHandlers = true; // run in line with the step, not queued after it
    raiseError = true; // a failing handler must not be logged and ignored
    tools = new Map(); // run id -> [tool, call id]
    chats = new Set();

    handleToolStart(tool, input, runId, parentRunId, tags, metadata, runName, toolCallId) {
      const name = runName || tool?.name || (Array.isArray(tool?.id) ? tool.id.at(-1) : "tool");
      this.tools.set(runId, [name, toolCallId]);
      emit("effect.before", token(name), toolCallId ? { call_id: String(toolCallId) } : undefined);
    }
    toolDone(runId) {
      const started = this.tools.get(runId);
      if (!started) return;
      this.tools.delete(runId);
      const [name, callId] = started;
      emit("effect.after", token(name), callId ? { call_id: String(callId) } : undefined);
    }
    handleToolEnd(output, runId) { this.toolDone(runId); }
    handleToolError(err, runId) { this.toolDone(runId); } // it returned, by raising: its effect is done

    handleChatModelStart(llm, messages, runId) {
      this.chats.add(runId);
      emit("provider.before", "chat", { messages: messages?.[0]?.length ?? 0 });
    }
    handleLLMEnd(output, runId) {
      if (!this.chats.delete(runId)) return;
      let calls = 0;
      for (const gens of output?.generations ?? []) for (const g of gens) calls += g?.message?.tool_calls?.length ?? 0;
      emit("provider.after", "reply", { tool_calls: calls });
    }
    handleLLMError(err, runId) {
      if (!this.chats.delete(runId)) return;
      emit("provider.after", "error", { reason: err?.name || "Error" });
    }
  };
}

/** The user's graph, compiled with (or given) the session's checkpointer. */
function buildGraph(factory, saver) {
  if (typeof factory !== "function" && typeof factory?.compile !== "function" && typeof factory?.invoke !== "function") {
    throw new Error("--app must name a graph factory (a function), a StateGraph or a compiled graph");
  }
  const graph = typeof factory === "function" ? factory(saver) : factory;
  if (graph && typeof graph.invoke !== "function" && typeof graph.compile === "function") {
    return graph.compile({ checkpointer: saver }); // an uncompiled StateGraph
  }
  if (!graph || typeof graph.invoke !== "function") throw new Error("the graph factory returned no graph");
  if (graph.checkpointer !== saver) graph.checkpointer = saver;
  return graph;
}

/** The tools of the graph's ToolNodes (in subgraphs too), as bindTools sends them to the model. */
async function graphTools(graph, load) {
  const { convertToOpenAITool } = await load("@langchain/core/utils/function_calling");
  const found = new Map();
  const seen = new Set();
  const visit = (g) => {
    if (!g || seen.has(g)) return;
    seen.add(g);
    for (const node of Object.values(g.nodes ?? {})) {
      const bound = node?.bound ?? node;
      for (const t of bound?.tools ?? []) {
        if (!t || found.has(t.name)) continue;
        const f = convertToOpenAITool(t).function;
        found.set(f.name, { name: f.name, parameters: f.parameters ?? null, description: f.description ?? "" });
      }
      if (bound?.nodes) visit(bound);
    }
  };
  visit(graph);
  return [...found.values()];
}

/** The session's thread: made (and saved before anything else) by the first `run`. */
function threadId(session, command) {
  const file = path.join(session, THREAD_FILE);
  if (fs.existsSync(file)) return fs.readFileSync(file, "utf8").trim();
  if (command !== "run") return null;
  const made = `thread-${randomUUID().replace(/-/g, "")}`;
  fs.writeFileSync(`${file}.tmp`, `${made}\n`);
  fs.renameSync(`${file}.tmp`, file);
  return made;
}

/**
 * The session's database opened before the framework loads, as `SqliteSaver.fromConnString`
 * opens it (`new Database(file)`, with the better-sqlite3 the app's saver imports); null when
 * there is none yet or it cannot be opened so (the framework's path then opens it as before).
 */
function openEarly(appRef, file) {
  if (!fs.existsSync(file)) return null; // opening would create it: the saver's to do
  try {
    const saverEntry = createRequire(parseAppRef(appRef).file).resolve("@langchain/langgraph-checkpoint-sqlite");
    const Database = createRequire(saverEntry)("better-sqlite3");
    return new Database(file);
  } catch {
    return null;
  }
}

/**
 * Whether `graph.invoke(null)` on the thread would find no task: its latest checkpoint (as
 * `getTuple` picks it) has no pending writes and no Send, and every trigger channel that holds a
 * value was seen by its node at that version (LangGraph's `_triggers`). Only a StateGraph's
 * checkpoint (nodes triggered by `branch:to:NODE`, a `__start__` node) in the format known here,
 * with no subgraph state, is judged; anything else, or any doubt, is false (the framework decides).
 */
function nothingToResume(db, tid) {
  try {
    if (String(db.pragma("journal_mode", { simple: true })).toLowerCase() !== "wal") return false; // setup() would change it
    const tables = db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name IN ('checkpoints', 'writes')").get().n;
    if (tables !== 2) return false; // setup() would make them
    if (db.prepare("SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_ns != '' LIMIT 1").get(tid)) return false;
    if (db.prepare("SELECT 1 FROM writes WHERE thread_id = ? AND checkpoint_ns != '' LIMIT 1").get(tid)) return false;
    const row = db.prepare("SELECT checkpoint_id AS id, type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1").get(tid);
    if (!row || (row.type ?? "json") !== "json") return false;
    if (db.prepare("SELECT 1 FROM writes WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ? LIMIT 1").get(tid, row.id)) return false;
    return idleCheckpoint(JSON.parse(Buffer.isBuffer(row.checkpoint) ? row.checkpoint.toString("utf8") : String(row.checkpoint)));
  } catch {
    return false;
  }
}

function idleCheckpoint(cp) {
  if (cp?.v !== CHECKPOINT_V) return false;
  const versions = cp.channel_versions ?? {};
  const seen = cp.versions_seen ?? {};
  const values = cp.channel_values ?? {};
  // A StateGraph's: every node that ran has its branch channel, and the start node ran.
  const nodes = new Set(Object.keys(versions).filter((c) => c.startsWith(BRANCH)).map((c) => c.slice(BRANCH.length)));
  if (!(START in seen)) return false;
  for (const node of Object.keys(seen)) {
    if (!["__input__", "__interrupt__", START].includes(node) && !nodes.has(node)) return false;
  }
  for (const [channel, value] of Object.entries(values)) {
    if (channel === TASKS) {
      if (!Array.isArray(value) || value.length) return false; // a Send to run
      continue;
    }
    const node = channel === START ? START : channel.startsWith(BRANCH) ? channel.slice(BRANCH.length) : null;
    if (node === null) {
      if (channel.startsWith("join:")) return false; // a barrier: not judged here
      continue; // a state key: no StateGraph node is triggered by one
    }
    const version = versions[channel];
    const saw = seen[node]?.[channel];
    if (typeof version !== "number" || typeof saw !== "number" || version > saw) return false;
  }
  return true;
}

async function host(args) {
  // Recover with nothing to resume: end as the framework's path would (no event, exit 0).
  let early = null;
  if (args.command === "recover" && process.env[CHECK_FIRST_ENV] !== "0") {
    const file = path.join(args.session, THREAD_FILE);
    const tid = fs.existsSync(file) ? fs.readFileSync(file, "utf8").trim() : null;
    early = tid === null ? null : openEarly(args.app, path.join(args.session, DB));
    if (early !== null && nothingToResume(early, tid)) {
      early.close();
      return 0;
    }
  }
  const app = await loadApp(args.app);
  if (args.command === "describe") {
    return describe(async () => {
      const { MemorySaver } = await app.load("@langchain/langgraph");
      return graphTools(buildGraph(app.value, new MemorySaver()), app.load);
    });
  }
  const tid = threadId(args.session, args.command);
  if (tid === null) {
    console.error(`recover: ${args.session} holds no thread (no run was started)`);
    return 1;
  }
  const { SqliteSaver } = await app.load("@langchain/langgraph-checkpoint-sqlite");
  const { BaseCallbackHandler } = await app.load("@langchain/core/callbacks/base");
  // The connection the check opened, else opened here: one open, as fromConnString makes it.
  const saver = early !== null ? new SqliteSaver(early) : SqliteSaver.fromConnString(path.join(args.session, DB));
  try {
    saver.setup();
    wrapSaver(saver, existingCommits(saver.db, tid));
    process.chdir(args.workspace); // the user's tools act on the current directory
    const graph = buildGraph(app.value, saver);
    const Handler = probeHandler(BaseCallbackHandler);
    const config = {
      configurable: { thread_id: tid },
      callbacks: [new Handler()],
      durability: "sync",
      maxConcurrency: 1, // one task at a time: a task's writes and the next checkpoint in one order
    };
    const input = args.command === "run" ? { messages: [{ role: "user", content: args.task }] } : null;
    await graph.invoke(input, config);
  } finally {
    saver.db.close();
  }
  return 0;
}

main(host, { appEnv: APP_ENV, defaultApp: DEFAULT_APP });
