import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { buildProgram } from "../../src/cli/program.js";
import { runCli } from "../../src/cli/run.js";

// The command line as a person meets it: every command and subcommand answers --help (exit 0,
// usage on stdout), and a usage mistake exits 2 with a message on stderr, before any service
// is contacted (none runs here).

async function cli(...argv: string[]) {
  let out = "";
  let err = "";
  const code = await runCli(argv, {
    writeOut: (s) => {
      out += s;
    },
    writeErr: (s) => {
      err += s;
    },
  });
  return { code, out, err };
}

const COMMANDS = [
  [],
  ["keys"],
  ["keys", "create"],
  ["keys", "import"],
  ["keys", "list"],
  ["keys", "revoke"],
  ["keys", "set-plan"],
  ["limits"],
  ["limits", "set"],
  ["limits", "list"],
  ["pools"],
  ["pools", "set"],
  ["pools", "list"],
  ["dlq"],
  ["dlq", "list"],
  ["dlq", "show"],
  ["dlq", "replay"],
  ["backup"],
  ["restore"],
  ["migrate"],
  ["query"],
  ["stats"],
  ["clickhouse"],
  ["clickhouse", "serve"],
];

describe("help", () => {
  it.each(COMMANDS)("headroom %s --help: usage on stdout, exit 0", async (...command) => {
    const r = await cli(...command, "--help");
    expect(r.code).toBe(0);
    expect(r.err).toBe("");
    expect(r.out).toContain(`Usage: headroom ${command.join(" ")}`.trimEnd());
  });

  it("answers -h and `help <command>` the same way", async () => {
    const long = await cli("keys", "--help");
    expect(await cli("keys", "-h")).toEqual(long);
    expect(await cli("help", "keys")).toEqual(long);
  });

  it("shows the help for bare `headroom`, as a success", async () => {
    const r = await cli();
    expect(r.code).toBe(0);
    for (const c of [
      "keys",
      "dlq",
      "backup",
      "restore",
      "migrate",
      "query",
      "stats",
      "clickhouse",
    ]) {
      expect(r.out).toMatch(new RegExp(`^  ${c}\\b`, "m"));
    }
  });

  it("the README's --help line names every command", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const line = /`npx headroom --help` lists every command:([^.]*)\./.exec(readme)?.[1] ?? "";
    const named = [...line.matchAll(/`([a-z][a-z-]*)`/g)].map((m) => m[1]);
    const commands = buildProgram().commands.map((c) => c.name());
    expect(named.sort()).toEqual(commands.sort());
  });

  it("documents the options the docs use", async () => {
    expect((await cli("keys", "create", "--help")).out).toMatch(
      /--project <id>[\s\S]*--plan[\s\S]*--scope <scope>[\s\S]*"report", "read"/,
    );
    expect((await cli("keys", "set-plan", "--help")).out).toMatch(/--monthly[\s\S]*--burst/);
    expect((await cli("dlq", "replay", "--help")).out).toMatch(/--rows <file>[\s\S]*--all/);
    expect((await cli("stats", "--help")).out).toMatch(/--since <period>[\s\S]*"24h"/);
    expect((await cli("query", "--help")).out).toContain("PrettyCompactMonoBlock");
  });
});

describe("usage errors exit 2", () => {
  it.each([
    [["nope"], /unknown command 'nope'/],
    [["keys"], /Usage: headroom keys/],
    [["keys", "create"], /required option '--project <id>'/],
    [["keys", "create", "--project", "p", "--scope", "root"], /--scope.*'root' is invalid/],
    [["keys", "create", "--project", "p", "--scope", "admin"], /admin key belongs to no project/],
    [["keys", "create", "--scope", "manage"], /--project/],
    [["keys", "import", "--project", "p"], /required option '--key <key>'/],
    [["keys", "revoke"], /missing required argument 'key-id'/],
    [["keys", "list", "--bogus"], /unknown option '--bogus'/],
    [["keys", "set-plan", "--project", "p", "--plan", "free", "--monthly", "0"], /--monthly/],
    [["keys", "set-plan", "--project", "p", "--plan", "free", "--burst", "1.5"], /--burst/],
    [["dlq", "show"], /missing required argument 'job-id'/],
    [["dlq", "replay"], /give a job id, or --all/],
    [["dlq", "replay", "7", "--all"], /--all takes no job id/],
    [["query"], /missing required argument 'sql'/],
    [["stats", "--since", "yesterday"], /--since <period>.*'yesterday' is invalid/],
    [["clickhouse", "serve", "--port", "99999"], /--port <n>.*'99999' is invalid/],
    [["clickhouse", "serve", "--fault-error-rate", "2"], /--fault-error-rate/],
    [["clickhouse", "start"], /unknown command 'start'/],
    [["limits", "set", "--project", "p"], /give --file, one or more --limit, or --none/],
    [["limits", "set", "--project", "p", "--none", "--file", "f.json"], /one of them/],
    [["limits", "set", "--project", "p", "--limit", "bedrock/m:requests:1m=-1"], /--limit/],
    [["limits", "set", "--project", "p", "--limit", "bedrock/m:calls:1m=60"], /dimension/],
    [["limits", "list"], /required option '--project <id>'/],
    [["pools", "set", "--project", "p", "--pool", "openai=chat"], /--pool/],
    [["pools", "set", "--project", "p"], /give --file, one or more --pool, or --none/],
  ])("headroom %j", async (argv, message) => {
    const r = await cli(...argv);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(r.err).not.toMatch(/\n\s+at /); // no stack trace
    expect(r.out).toBe("");
  });
});

describe("version and defaults", () => {
  it("headroom --version and -V print package.json's version, exit 0", async () => {
    const { version } = JSON.parse(
      readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
    ) as { version: string };
    for (const flag of ["--version", "-V"]) {
      expect(await cli(flag)).toEqual({ code: 0, out: `${version}\n`, err: "" });
    }
  });

  it("alerts add --help gives the cooldown's default in the form the option takes", async () => {
    const r = await cli("alerts", "add", "--help");
    expect(r.out).toMatch(/--cooldown <duration>[\s\S]*\(default: 10m\)/);
    expect(r.out).not.toContain("(default: 600)");
  });

  it("alerts add takes a window length among the providers' and refuses another before any service", async () => {
    const help = await cli("alerts", "add", "--help");
    expect(help.out.replace(/\s+/g, " ")).toContain(
      '--window <length> only the provider\'s windows of this length; without it, every window of the metric (choices: "1s", "10s", "1m", "1h", "5h", "1d", "7d", "1mo")',
    );
    const args = ["alerts", "add", "--project", "p", "--metric", "requests", "--warn", "70"];
    const r = await cli(
      ...args,
      "--critical",
      "90",
      "--webhook",
      "https://x.test/h",
      "--window",
      "2d",
    );
    expect(r.code).toBe(2);
    expect(r.err).toContain("--window");
  });

  it("alerts add --metric takes any dimension and refuses what is not one before any service", async () => {
    const help = await cli("alerts", "add", "--help");
    expect(help.out.replace(/\s+/g, " ")).toContain("--metric <dimension>");
    expect(help.out).toContain("input_tokens");
    const rest = ["--warn", "70", "--critical", "90", "--webhook", "https://x.test/h"];
    for (const bad of ["Input-Tokens", "input tokens", "x".repeat(65)]) {
      const r = await cli("alerts", "add", "--project", "p", "--metric", bad, ...rest);
      expect(r.code, bad).toBe(2);
      expect(r.err).toMatch(/--metric[\s\S]*lowercase snake case/);
    }
  });
});
