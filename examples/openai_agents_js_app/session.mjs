// A file-backed session for the Agents SDK, as the SDK's samples write one: the history as one JSON
// file, loaded on every read and replaced on every write. The SDK ships no durable session.
//
// Replaced, not rewritten in place: the new history goes to a temporary file that is renamed
// over the old one, so a process killed in the middle leaves the old file or the new one, never
// an empty or half-written file (a session that truncates the file first and then writes would
// leave it empty, and every restart would die parsing it).
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";

export class FileSession {
  constructor(file, sessionId = "default") {
    this.file = file;
    this.sessionId = sessionId;
  }

  async getSessionId() {
    return this.sessionId;
  }

  load() {
    return existsSync(this.file) ? JSON.parse(readFileSync(this.file, "utf8")) : [];
  }

  save(items) {
    const tmp = path.join(path.dirname(this.file), `.${path.basename(this.file)}.tmp`);
    writeFileSync(tmp, JSON.stringify(items));
    renameSync(tmp, this.file);
  }

  async getItems(limit) {
    const items = this.load();
    return limit === undefined || limit === null ? items : items.slice(-limit);
  }

  async addItems(items) {
    if (items.length) this.save([...this.load(), ...items]);
  }

  async popItem() {
    const items = this.load();
    const last = items.pop();
    this.save(items);
    return last;
  }

  async clearSession() {
    this.save([]);
  }
}

/** The app's session in `dir` (one per conversation; crashmatrix gives each case its own dir). */
export function openSession(dir) {
  return new FileSession(path.join(dir, "session.json"), "changelog");
}
