// What every crashmatrix Node host shares: its command line, a quiet environment, probes that end the process, the user's app loaded from the user's project.
//
// A host is the program the harness runs for a framework integration (integrations/*_js/host.mjs):
//
//   node HOST [--app FILE:EXPORT] run SESSION WORKSPACE PROVIDER_URL TASK
//   node HOST [--app FILE:EXPORT] recover SESSION WORKSPACE PROVIDER_URL
//   node HOST [--app FILE:EXPORT] describe
//   node HOST [--app FILE:EXPORT] dump SESSION      (a host that can print its store)
//
// CommonJS, like crashmatrix-probe.js beside it: an ESM host imports it by path, and nothing
// here needs a package.json. It loads no framework: a framework is the user's dependency, found
// in the user's project (the app file's folder and up), never in crashmatrix's checkout, so the
// host and the app share one copy of every module (two copies of @langchain/core would not see
// each other's callbacks or classes).
"use strict";

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { createRequire } = require("node:module");
const { pathToFileURL } = require("node:url");
const { probe, ProbeDetached } = require("./crashmatrix-probe.js");

const DETACHED_EXIT = 3; // the harness closed the channel: take no further step
const USAGE_EXIT = 2;
// `describe` runs with no provider: the app's client points where nothing listens (port 9,
// discard), so an app that calls its model while being built fails at once, reaching no vendor.
const DESCRIBE_BASE_URL = "http://127.0.0.1:9/v1";
// Every hosted run's environment, whatever the caller's shell holds: a placeholder key (clients
// refuse to start without one; never a real one), every vendor's tracing off, and LangChain's
// callbacks awaited (by default LangChain.js queues them in the background, so a probe in a
// callback would land after the step it reports).
const QUIET_ENV = Object.freeze({
  OPENAI_API_KEY: "sk-crashmatrix-fake",
  ANTHROPIC_API_KEY: "sk-ant-crashmatrix-fake",
  LANGSMITH_TRACING: "false",
  LANGSMITH_TRACING_V2: "false",
  LANGCHAIN_TRACING_V2: "false",
  LANGCHAIN_TRACING: "false",
  LANGCHAIN_CALLBACKS_BACKGROUND: "false",
  OPENAI_AGENTS_DISABLE_TRACING: "1",
  OPENAI_AGENTS_DONT_LOG_MODEL_DATA: "1",
  OPENAI_AGENTS_DONT_LOG_TOOL_DATA: "1",
});

class UsageError extends Error {}

/**
 * The host's command line: {app, command, session, workspace, providerUrl, task}; `app` from
 * `--app`, else the environment variable `appEnv`, else `defaultApp`. Throws UsageError.
 */
function parseArgs(argv, { appEnv, defaultApp }) {
  const rest = [...argv];
  let app = (appEnv && process.env[appEnv]) || defaultApp;
  while (rest.length && rest[0].startsWith("--")) {
    const flag = rest.shift();
    if (flag === "--app" && rest.length) app = rest.shift();
    else if (flag.startsWith("--app=")) app = flag.slice("--app=".length);
    else throw new UsageError(`unknown option ${flag}`);
  }
  const command = rest.shift();
  if (command === "describe" && rest.length === 0) return { app, command };
  // `dump SESSION`: print what the app's store holds (a host that offers it; read-only).
  if (command === "dump" && rest.length === 1) return { app, command, session: path.resolve(rest[0]) };
  const want = { run: 4, recover: 3 }[command];
  if (want === undefined) throw new UsageError(`expected run, recover or describe, got ${JSON.stringify(command)}`);
  if (rest.length !== want) {
    throw new UsageError(command === "run" ? "run SESSION WORKSPACE PROVIDER_URL TASK" : "recover SESSION WORKSPACE PROVIDER_URL");
  }
  const [session, workspace, providerUrl, task] = rest;
  return { app, command, session: path.resolve(session), workspace: path.resolve(workspace), providerUrl, task };
}

/** Set the quiet environment, and OPENAI_BASE_URL at the provider (describe: at nothing). */
function quietEnvironment(args, extra = {}) {
  Object.assign(process.env, QUIET_ENV, extra);
  process.env.OPENAI_BASE_URL = args.providerUrl ?? DESCRIBE_BASE_URL; // describe, dump: no provider
}

/**
 * One probe event. When the harness is gone the process ends here, exit 3, from inside whatever
 * framework code called it: a framework that catches errors (a callback manager that logs them,
 * a tool runner that turns them into a tool result) must not get to take another step.
 */
function emit(kind, label, detail) {
  try {
    probe(kind, label, detail);
  } catch (err) {
    if (!(err instanceof ProbeDetached)) throw err;
    try { fs.writeSync(2, `crashmatrix: ${err.message}; exiting\n`); } catch { /* stderr gone too */ }
    process.exit(DETACHED_EXIT);
  }
}

/**
 * A lock for async sections (a store write's before, the write, written and after): the next
 * holder starts when the previous one's function settled, so no other commit's events land
 * between one commit's events.
 */
function serialiser() {
  let tail = Promise.resolve();
  return function serialised(fn) {
    const run = tail.then(fn, fn);
    tail = run.then(() => undefined, () => undefined);
    return run;
  };
}

/** `FILE:EXPORT` split, FILE made absolute against `cwd` (the last ':' separates them). */
function parseAppRef(ref, cwd = process.cwd()) {
  const at = typeof ref === "string" ? ref.lastIndexOf(":") : -1;
  if (at <= 0 || at === ref.length - 1) {
    throw new UsageError(`--app ${JSON.stringify(ref)}: expected FILE:EXPORT, e.g. ./src/graph.mjs:build`);
  }
  return { file: path.resolve(cwd, ref.slice(0, at)), exportName: ref.slice(at + 1) };
}

/** Whether Node loads `file` as an ES module (.mjs, or .js under a package.json with "type": "module"). */
function isEsm(file) {
  if (file.endsWith(".mjs")) return true;
  if (file.endsWith(".cjs")) return false;
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    const pkg = path.join(dir, "package.json");
    if (fs.existsSync(pkg)) {
      try { return JSON.parse(fs.readFileSync(pkg, "utf8")).type === "module"; } catch { return false; }
    }
    if (path.dirname(dir) === dir) return false;
  }
}

let esmResolve; // (specifier, parentURL) => URL, from a module that has import.meta

async function resolveEsm(specifier, parentUrl) {
  if (esmResolve === undefined) {
    // import.meta.resolve with a parent needs `--experimental-import-meta-resolve` on Node 20
    // (the hosts are started with it); without it the parent is ignored and this returns null.
    const m = await import("data:text/javascript,export const r=(s,p)=>import.meta.resolve(s,p)");
    esmResolve = m.r;
  }
  try {
    return esmResolve(specifier, parentUrl);
  } catch {
    return null;
  }
}

/**
 * The user's app: `{file, exportName, value, load}`. `load(specifier)` imports a package as the
 * app itself would (`import` from an ES module app, `require` from a CommonJS one), resolved from
 * the app file's folder: the user's node_modules, the user's versions.
 */
async function loadApp(ref, cwd = process.cwd()) {
  const { file, exportName } = parseAppRef(ref, cwd);
  if (!fs.existsSync(file)) throw new Error(`--app ${JSON.stringify(ref)}: no such file ${file}`);
  const esm = isEsm(file);
  const parentUrl = pathToFileURL(file).href;
  const requireFromApp = createRequire(file);
  async function load(specifier) {
    if (!esm) return requireFromApp(specifier);
    const url = await resolveEsm(specifier, parentUrl);
    if (url && !url.startsWith("data:")) return import(url);
    // No ESM resolver: the package's CommonJS entry, found from the app's folder all the same.
    return import(pathToFileURL(requireFromApp.resolve(specifier)).href);
  }
  const mod = await import(parentUrl);
  const value = exportName in mod ? mod[exportName] : mod.default?.[exportName];
  if (value === undefined) throw new Error(`--app ${JSON.stringify(ref)}: ${file} exports no ${JSON.stringify(exportName)}`);
  return { file, exportName, value, load, esm };
}

/**
 * The `describe` command: `toolsOfApp()` (async; it loads and builds the app) run in a scratch
 * directory, anything printed on stdout meanwhile sent to stderr; then one line of JSON
 * `{"tools": [{name, parameters, description}]}` on stdout. Returns the exit code.
 */
async function describe(toolsOfApp) {
  const here = process.cwd();
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "crashmatrix-describe-"));
  const log = console.log;
  console.log = (...a) => console.error(...a);
  let tools;
  try {
    process.chdir(scratch);
    tools = (await toolsOfApp()).map((t) => ({
      name: t.name, parameters: t.parameters ?? null, description: t.description || "",
    }));
  } catch (err) {
    console.error(err && err.stack ? err.stack : String(err));
    return 1;
  } finally {
    console.log = log;
    process.chdir(here);
    fs.rmSync(scratch, { recursive: true, force: true });
  }
  fs.writeSync(1, `${JSON.stringify({ tools })}\n`);
  return 0;
}

/**
 * Run a host: `body(args)` (async, returns an exit code) with the command line parsed and the
 * environment quiet; the process then exits with that code even if the framework left sockets
 * or timers open (a keep-alive agent would hold an idle host for seconds). An exception is
 * printed and exits 1; bad usage exits 2.
 */
function main(body, { appEnv, defaultApp, env = {} }) {
  let args;
  try {
    args = parseArgs(process.argv.slice(2), { appEnv, defaultApp });
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`usage: [--app FILE:EXPORT] run|recover|describe ...: ${err.message}\n`);
    process.exit(USAGE_EXIT);
  }
  quietEnvironment(args, env);
  if (args.session && args.command !== "dump") fs.mkdirSync(args.session, { recursive: true });
  Promise.resolve()
    .then(() => body(args))
    .then((code) => code ?? 0, (err) => {
      if (err instanceof UsageError) { console.error(err.message); return USAGE_EXIT; }
      console.error(err && err.stack ? err.stack : String(err));
      return 1;
    })
    .then((code) => {
      // stdout may be a pipe still draining: exit once it is flushed.
      process.stdout.write("", () => process.exit(code));
    });
}

module.exports = {
  DETACHED_EXIT, DESCRIBE_BASE_URL, QUIET_ENV, UsageError,
  parseArgs, quietEnvironment, emit, serialiser, parseAppRef, isEsm, loadApp, describe, main,
};
