// The agent side of the crashmatrix probe channel for Node (docs/probe-protocol.md); no dependencies.
//
// CommonJS on purpose: a copied `.js` file is CommonJS in any folder without a package.json
// "type" field, `require` works from CommonJS, and ESM code can `import { probe } from` it too
// (Node detects the `exports.x =` names), so "copy the file" is the whole installation.
"use strict";

const fs = require("node:fs");

// The nine kinds of docs/probe-protocol.md, "Event kinds"; nothing else goes on the wire.
const KINDS = Object.freeze([
  "commit.before", "commit.written", "commit.after",
  "effect.before", "effect.after",
  "provider.before", "provider.after",
  "inbox.poll", "recovery.branch",
]);
const KIND_SET = new Set(KINDS);
const PERMIT = 0x63; // "c": one permit per event

/** The harness is gone (end-of-file, a byte other than "c", or a failed write): take no further step. */
class ProbeDetached extends Error {
  constructor(message) {
    super(message);
    this.name = "ProbeDetached";
  }
}

// Parsed on the first probe, not at require time, so that a process can set the variable
// before its first boundary; `undefined` = not parsed yet, `null` = no harness attached.
let channel;
let n = 0; // events this process has sent; informational for the harness
let permits = 0; // permits read from the channel and not used yet (the harness may grant ahead)
let detached = null; // once gone, always gone: every later probe throws the same way

function attach() {
  const spec = process.env.CRASHMATRIX_PROBE;
  if (!spec) return null; // unset or empty: no harness, every probe is a no-op
  const m = /^fd:(\d+),(\d+)$/.exec(spec);
  if (!m) throw new Error(`CRASHMATRIX_PROBE must look like fd:R,W, got ${JSON.stringify(spec)}`);
  return { read: Number(m[1]), write: Number(m[2]) };
}

/**
 * Report one boundary event and wait for the harness's permit to go on.
 *
 * @param {string} kind one of KINDS, e.g. "effect.after"
 * @param {string} label what the boundary is about (a commit label, a tool name, ...)
 * @param {object} [detail] extra facts, e.g. {seq: 3} or {call_id: "call_0"}
 * @throws {ProbeDetached} when the harness is gone
 */
function probe(kind, label, detail) {
  // Validated even with no harness attached, so a typo fails in the agent's own tests too.
  if (!KIND_SET.has(kind)) throw new TypeError(`unknown probe kind ${JSON.stringify(kind)}; known: ${KINDS.join(", ")}`);
  if (typeof label !== "string" || label === "") throw new TypeError("probe label must be a non-empty string");
  if (detail !== undefined && (detail === null || typeof detail !== "object" || Array.isArray(detail))) {
    throw new TypeError("probe detail must be an object");
  }
  if (channel === undefined) channel = attach();
  if (channel === null) return; // no harness: no I/O, no waiting
  if (detached) throw detached;
  n += 1;
  const event = { kind, label, n, pid: process.pid };
  if (detail && Object.keys(detail).length) event.detail = detail;
  // One write per event where possible: pipe writes up to 4096 bytes are atomic. JSON.stringify
  // escapes newlines inside strings, so the only raw newline is the terminator.
  const line = Buffer.from(`${JSON.stringify(event)}\n`, "utf8");
  try {
    for (let off = 0; off < line.length;) off += fs.writeSync(channel.write, line, off);
  } catch (err) {
    // EPIPE (Node ignores SIGPIPE, so it arrives as an error) or any other failed write.
    throw gone(`write failed (${err.code || err.message})`);
  }
  // The event is completely written before we wait: the harness acts on it while we block.
  if (permits === 0) {
    const buf = Buffer.alloc(4096);
    let got;
    try {
      got = fs.readSync(channel.read, buf, 0, buf.length, null); // blocks until a grant arrives
    } catch (err) {
      throw gone(`read failed (${err.code || err.message})`);
    }
    if (got === 0) throw gone("end-of-file");
    for (let i = 0; i < got; i += 1) {
      if (buf[i] !== PERMIT) throw gone(`unexpected byte 0x${buf[i].toString(16).padStart(2, "0")}`);
    }
    permits = got; // every "c" read is one permit, used by this and later events
  }
  permits -= 1;
}

function gone(why) {
  detached = new ProbeDetached(`probe channel closed at event ${n}: ${why}`);
  return detached;
}

module.exports = { probe, ProbeDetached, KINDS };
