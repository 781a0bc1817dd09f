import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

// The docs are read by following links: every relative link and anchor in the repository's
// Markdown resolves, and so do the runbook links of the Prometheus rules and the docs pages the
// code names. Anchors are GitHub's: the heading's text, lowercased, punctuation dropped, spaces
// as hyphens, repeats numbered.

const ROOT = join(import.meta.dirname, "../..");
const tracked = (pattern: string) =>
  execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", pattern], {
    cwd: ROOT,
    encoding: "utf8",
  })
    .split("\n")
    .filter((f) => f !== "" && existsSync(join(ROOT, f)));

/** Lines outside fenced code blocks. */
function prose(text: string): string[] {
  let fenced = false;
  return text.split("\n").filter((line) => {
    if (line.startsWith("```")) fenced = !fenced;
    return !fenced && !line.startsWith("```");
  });
}

function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/[^\p{L}\p{N}\- _]/gu, "")
    .replace(/ /g, "-");
}

const anchorsCache = new Map<string, Set<string>>();
function anchorsOf(file: string): Set<string> {
  let anchors = anchorsCache.get(file);
  if (anchors) return anchors;
  anchors = new Set();
  const seen = new Map<string, number>();
  for (const line of prose(readFileSync(join(ROOT, file), "utf8"))) {
    const m = /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const s = slug(m[1] as string);
    const n = seen.get(s) ?? 0;
    seen.set(s, n + 1);
    anchors.add(n === 0 ? s : `${s}-${n}`);
  }
  anchorsCache.set(file, anchors);
  return anchors;
}

/** Why a link from `from` (a repository path) to `target` does not resolve, or null. */
function broken(from: string, target: string): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null;
  const [path = "", anchor] = target.split("#");
  const file = path === "" ? from : normalize(join(dirname(from), decodeURIComponent(path)));
  if (!existsSync(join(ROOT, file))) return `${file} does not exist`;
  if (anchor === undefined || anchor === "") return null;
  if (!file.endsWith(".md")) return `${file} is not Markdown, so it has no #${anchor}`;
  return anchorsOf(file).has(anchor) ? null : `${file} has no heading #${anchor}`;
}

describe("docs links", () => {
  it("the slug rule is GitHub's", () => {
    expect(slug("Delivery guarantees, in plain words")).toBe("delivery-guarantees-in-plain-words");
    expect(slug("`headroom import`")).toBe("headroom-import");
    expect(slug("Runbook: HeadroomNoInserts")).toBe("runbook-headroomnoinserts");
    expect(slug("POST /api/report")).toBe("post-apireport");
  });

  it("finds a broken link when there is one (the check itself)", () => {
    expect(broken("README.md", "docs/nowhere.md")).toBe("docs/nowhere.md does not exist");
    expect(broken("README.md", "docs/alerts.md#no-such-heading")).toMatch(/has no heading/);
    expect(broken("docs/alerts.md", "../SECURITY.md")).toBeNull();
  });

  it("every relative link and anchor in the Markdown resolves", () => {
    const files = tracked("*.md").filter((f) => !f.startsWith("node_modules/"));
    expect(files).toContain("README.md");
    expect(files).toContain("docs/report-api.md");
    const problems: string[] = [];
    for (const file of files) {
      for (const line of prose(readFileSync(join(ROOT, file), "utf8"))) {
        // Inline code is not a link.
        for (const m of line.replace(/`[^`]*`/g, "").matchAll(/\]\(([^)\s]+)\)/g)) {
          const why = broken(file, m[1] as string);
          if (why) problems.push(`${file}: (${m[1]}): ${why}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it("every runbook link of the Prometheus rules resolves", () => {
    const rules = parse(readFileSync(join(ROOT, "ops/prometheus/headroom-rules.yml"), "utf8")) as {
      groups: { rules: { alert?: string; annotations?: { runbook?: string } }[] }[];
    };
    const links = rules.groups.flatMap((g) => g.rules.map((r) => r.annotations?.runbook));
    expect(links.length).toBeGreaterThan(5);
    for (const link of links) {
      expect(link, "every alert has a runbook").toBeDefined();
      expect(broken("README.md", link as string), link).toBeNull();
    }
  });

  it("every docs page the code and the configuration name exists", () => {
    const named = new Set<string>();
    const sources = [
      ...tracked("src/**/*.ts"),
      ...tracked("workers/*.ts"),
      ...tracked("bench/*.ts"),
      ...tracked("test/**/*.ts"),
      ...tracked("ops/**/*.yml"),
      "docker-compose.yml",
    ];
    for (const file of sources) {
      // This file names a missing page on purpose, to test the check.
      if (file.endsWith("docs-links.test.ts")) continue;
      for (const m of readFileSync(join(ROOT, file), "utf8").matchAll(/\bdocs\/[a-z-]+\.md\b/g)) {
        named.add(m[0]);
      }
    }
    expect(named.size).toBeGreaterThan(3);
    expect([...named].filter((page) => !existsSync(join(ROOT, page)))).toEqual([]);
  });
});
