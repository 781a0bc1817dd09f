import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, expect, it } from "vitest";
import { openStackLog } from "../../src/local/stack-log.js";
import { eventually } from "../helpers/eventually.js";

// The local stack's log: every line whole in headroom.log, readable lines on the terminal.

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setUp(isTTY: boolean) {
  const dir = mkdtempSync(join(tmpdir(), "stack-log-"));
  dirs.push(dir);
  const terminalPath = join(dir, "terminal");
  const log = openStackLog(dir, { terminal: { fd: openSync(terminalPath, "a"), isTTY } });
  return {
    log,
    terminal: () => readFileSync(terminalPath, "utf8"),
    file: () => readFileSync(log.path, "utf8"),
  };
}

const info = JSON.stringify({ level: 30, time: 0, name: "edge", msg: "edge ready", port: 3000 });
const warn = JSON.stringify({ level: 40, time: 0, name: "stack", msg: "alert webhooks may reach" });

it("keeps every line whole in headroom.log, and shows a piped terminal only warnings and what is not JSON", () => {
  const { log, terminal, file } = setUp(false);
  log.line(info);
  log.destination.write(`${warn}\n`);
  log.line("Error: boom");
  log.close();
  expect(log.path).toMatch(/headroom\.log$/);
  expect(file()).toBe(`${info}\n${warn}\nError: boom\n`);
  expect(terminal()).not.toContain("{");
  expect(terminal()).not.toContain("edge ready");
  expect(terminal()).toMatch(/WARN \(stack\): alert webhooks may reach\n/);
  expect(terminal()).toContain("Error: boom\n");
});

it("shows a terminal every line, readable", () => {
  const { log, terminal } = setUp(true);
  log.line(info);
  log.close();
  expect(terminal()).toContain("edge ready");
  expect(terminal()).toContain("port");
  expect(terminal()).not.toContain('"level"');
});

it("follows a child's output line by line, a line split across chunks included", async () => {
  const { log, file } = setUp(false);
  const stdout = new PassThrough();
  log.follow(stdout, null);
  stdout.write(info.slice(0, 10));
  stdout.write(`${info.slice(10)}\n${info}\n`);
  await eventually(() => expect(file()).toBe(`${info}\n${info}\n`));
  log.close();
});
