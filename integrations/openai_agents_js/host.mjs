// The program the harness runs as an OpenAI Agents SDK (JS) agent: the user's agent and session, unmodified, under probes.
//
//   node --experimental-import-meta-resolve host.mjs [--app FILE:EXPORT] run SESSION WORKSPACE PROVIDER_URL TASK
//   node --experimental-import-meta-resolve host.mjs [--app FILE:EXPORT] recover SESSION WORKSPACE PROVIDER_URL
//   node --experimental-import-meta-resolve host.mjs [--app FILE:EXPORT] describe
//   node --experimental-import-meta-resolve host.mjs [--app FILE:EXPORT] dump SESSION
//
// `--app` names the user's agent factory, `FILE:EXPORT` (a function returning an Agent, or an
// Agent). The SDK ships no durable session, so the app brings its own: FILE must also export
// `openSession(dir)`, returning the app's `Session` kept in `dir` (the harness's session
// directory). The agent runs as an SDK user runs one: `runner.run(agent, input, {session})`.
//
// "recover": the SDK has no resume-after-crash; as for the Python SDK (see
// integrations/openai_agents/host.py) a restart delivers the request it had not answered again:
// if the session's last item is an assistant message, nothing to do (exit 0); otherwise run the
// agent again with the newest user input's text, on the same session.
//
// `dump` prints the session's items as the SDK's own `getItems` returns them (one JSON line): the
// store reader (store.py) reads any session that way, whatever file or database it keeps.
//
// Seams: the runner's `agent_tool_start`/`agent_tool_end` events (emitted synchronously around
// the tool's invocation) as effect.before/after; the model provider's models wrapped for
// provider.before/after; the session's `addItems` wrapped for commit.before/written/after, with
// seq and a label as store.py numbers them. Tracing off (`setTracingDisabled`; the SDK exports
// traces to OpenAI by default).
//
// Checking first: with CRASHMATRIX_OPENAI_AGENTS_JS_SESSION=FILE:EXPORT naming the app's
// `openSession` in a module that does not load the SDK (the example's session.mjs), `recover`
// reads the session before the SDK loads and ends there when there is nothing to run (answered,
// or no input: what the SDK's path would do, with no event), and `dump` never loads the SDK:
// about 0.1 s instead of 1 (docs/frameworks.md, "Node start cost"). Whenever the app is loaded,
// that export must be the very function the app exports (else exit 1), so both paths open one
// session alike. CRASHMATRIX_NODE_CHECK_FIRST=0 always loads the app first.
//
// Exit codes: 0 done (or nothing to recover; describe/dump printed), 1 the run raised, or
// recover found no input, 2 usage, 3 the harness closed the probe channel.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const runtime = require(path.join(here, "..", "..", "clients", "js", "host-runtime.js"));
const { emit, serialiser, loadApp, parseAppRef, describe, main } = runtime;

const APP_ENV = "CRASHMATRIX_OPENAI_AGENTS_JS_APP";
const DEFAULT_APP = path.join(here, "..", "..", "examples", "openai_agents_js_app", "agent.mjs") + ":build";
const SESSION_EXPORT = "openSession";
const SESSION_ENV = "CRASHMATRIX_OPENAI_AGENTS_JS_SESSION"; // FILE:EXPORT: the app's openSession, without the SDK
const CHECK_FIRST_ENV = "CRASHMATRIX_NODE_CHECK_FIRST"; // "0": load the app before anything

function token(text) {
  return String(text).replace(/[^A-Za-z0-9_.-]+/g, "_").replace(/^_+|_+$/g, "") || "none";
}
const isInput = (i) => (i.type ?? "message") === "message" && ["user", "system", "developer"].includes(i.role);
const isModelOutput = (i) => ["function_call", "reasoning"].includes(i.type) || ((i.type ?? "message") === "message" && i.role === "assistant");

/** One item's part of a commit label (store.py's item_label, on the JS SDK's item shapes). */
function itemLabel(item, names) {
  const kind = item.type ?? "message";
  if (kind === "message") return `message.${token(item.role)}`;
  if (kind === "function_call") return `call.${token(item.name)}`;
  if (kind === "function_call_result") return `result.${token(item.name ?? names.get(item.callId) ?? "unknown")}`;
  return token(kind);
}

/** Probe every addItems of this session; seqs follow the `existing` commits. */
function wrapSession(session, existingCommits) {
  let count = existingCommits;
  const names = new Map();
  const addItems = session.addItems.bind(session);
  const serialised = serialiser();
  session.addItems = (items, ...rest) => serialised(async () => {
    if (!items?.length) return addItems(items, ...rest);
    for (const i of items) if (i.type === "function_call") names.set(i.callId, i.name);
    const label = items.map((i) => itemLabel(i, names)).join(",");
    count += 1;
    const seq = count;
    emit("commit.before", label, { seq });
    const out = await addItems(items, ...rest);
    emit("commit.written", label, { seq });
    emit("commit.after", label, { seq });
    return out;
  });
}

/** The session's items as writes (store.py's `group`): a commit starts at an input, and at model output after a non-model item. */
function countCommits(items) {
  let n = 0;
  let previous = null;
  for (const item of items) {
    if (previous === null || isInput(item) || (isModelOutput(item) && !isModelOutput(previous))) n += 1;
    previous = item;
  }
  return n;
}

/** A model provider whose models report each request as provider events. */
function probedProvider(inner) {
  const wrap = (model) => {
    if (model.__crashmatrixProbed) return model;
    const getResponse = model.getResponse.bind(model);
    const getStreamed = model.getStreamedResponse?.bind(model);
    model.getResponse = async (request) => {
      emit("provider.before", "chat", { messages: Array.isArray(request?.input) ? request.input.length : 1 });
      let response;
      try {
        response = await getResponse(request);
      } catch (err) {
        emit("provider.after", "error", { reason: err?.name || "Error" });
        throw err;
      }
      const calls = (response?.output ?? []).filter((o) => o.type === "function_call").length;
      emit("provider.after", "reply", { tool_calls: calls });
      return response;
    };
    if (getStreamed) {
      model.getStreamedResponse = async function* (request) {
        emit("provider.before", "chat", { messages: Array.isArray(request?.input) ? request.input.length : 1 });
        yield* getStreamed(request);
        emit("provider.after", "reply", {});
      };
    }
    model.__crashmatrixProbed = true;
    return model;
  };
  return { getModel: async (name) => wrap(await inner.getModel(name)) };
}

function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => p?.text ?? "").join("");
  return content == null ? "" : String(content);
}

async function loadAgent(app, sdk) {
  const found = app.value;
  const agent = found instanceof sdk.Agent ? found : typeof found === "function" ? await found() : null;
  if (!(agent instanceof sdk.Agent)) throw new Error(`--app: ${app.exportName} is neither an Agent nor a factory returning one`);
  return agent;
}

/** The app's own `openSession` (its file's export). */
async function appOpener(app) {
  const mod = await import(pathToFileURL(app.file).href);
  const open = mod[SESSION_EXPORT] ?? mod.default?.[SESSION_EXPORT];
  if (typeof open !== "function") {
    throw new Error(`${app.file} exports no ${SESSION_EXPORT}(dir): the SDK ships no durable session, the app must bring one`);
  }
  return open;
}

/** The `openSession` SESSION_ENV names, imported alone (null when none is named). */
async function namedOpener() {
  const ref = process.env[SESSION_ENV];
  if (!ref) return null;
  const { file, exportName } = parseAppRef(ref);
  const mod = await import(pathToFileURL(file).href);
  const open = exportName in mod ? mod[exportName] : mod.default?.[exportName];
  if (typeof open !== "function") throw new Error(`${SESSION_ENV}=${ref}: ${file} exports no function ${JSON.stringify(exportName)}`);
  return open;
}

/** The app's opener, checked against the one SESSION_ENV names: one function, or the two paths could differ. */
async function checkedOpener(app) {
  const open = await appOpener(app);
  const named = await namedOpener();
  if (named !== null && named !== open) {
    throw new Error(`${SESSION_ENV}=${process.env[SESSION_ENV]} is not the ${SESSION_EXPORT} ${app.file} exports: name the module it comes from`);
  }
  return open;
}

/** What `recover` does with the session's items: an exit code (nothing to run), or the input to run again. */
function recovery(args, existing) {
  const inputs = existing.filter((i) => isInput(i) && i.role === "user");
  if (!inputs.length) {
    console.error(`recover: ${args.session} holds no input (no run was started)`);
    return { code: 1 };
  }
  const last = existing.at(-1);
  if (last && (last.type ?? "message") === "message" && last.role === "assistant") return { code: 0 }; // answered
  return { input: textOf(inputs.at(-1).content) };
}

/** The agent's function tools as the model is sent them. */
function agentTools(agent) {
  return (agent.tools ?? []).filter((t) => t.type === "function").map((t) => ({
    name: t.name, parameters: t.parameters ?? null, description: t.description ?? "",
  }));
}

async function host(args) {
  // Check first: the session read before the SDK loads; nothing to run ends here, as below.
  let session = null;
  let existing = null;
  if ((args.command === "recover" || args.command === "dump") && process.env[CHECK_FIRST_ENV] !== "0") {
    const open = await namedOpener();
    if (open !== null) {
      session = await open(args.session);
      existing = await session.getItems();
      if (args.command === "dump") return dumped(existing);
      const decided = recovery(args, existing);
      if (decided.code !== undefined) return decided.code;
    }
  }
  const app = await loadApp(args.app);
  const sdk = await app.load("@openai/agents");
  sdk.setTracingDisabled(true); // the SDK exports traces to OpenAI's servers by default
  if (args.command === "describe") {
    if (process.env[SESSION_ENV]) await checkedOpener(app); // a wrong name fails before any case
    return describe(async () => agentTools(await loadAgent(app, sdk)));
  }
  const open = await checkedOpener(app);
  if (session === null) { // else the session the check opened: one per process, as before
    session = await open(args.session);
    existing = await session.getItems();
  }
  if (args.command === "dump") return dumped(existing);
  let input = args.task;
  if (args.command === "recover") {
    const decided = recovery(args, existing);
    if (decided.code !== undefined) return decided.code;
    input = decided.input;
  }
  wrapSession(session, countCommits(existing));
  process.chdir(args.workspace); // the user's tools act on the current directory
  const agent = await loadAgent(app, sdk);
  const runner = new sdk.Runner({ modelProvider: probedProvider(new sdk.OpenAIProvider()), tracingDisabled: true });
  const callId = (details) => (details?.toolCall?.callId ? { call_id: String(details.toolCall.callId) } : undefined);
  runner.on("agent_tool_start", (ctx, agent_, tool, details) => emit("effect.before", token(tool.name), callId(details)));
  runner.on("agent_tool_end", (ctx, agent_, tool, output, details) => emit("effect.after", token(tool.name), callId(details)));
  await runner.run(agent, input, { session });
  return 0;
}

function dumped(items) {
  fs.writeSync(1, `${JSON.stringify({ items })}\n`);
  return 0;
}

main(host, { appEnv: APP_ENV, defaultApp: DEFAULT_APP });
