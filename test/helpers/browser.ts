import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { Page } from "playwright-core";

// A real browser for the page's tests: Debian's chromium, driven by playwright-core through its
// executable (no browser download). Screenshots go to scratch/ (ignored by git).

export { CHROMIUM, launchChromium } from "../../bench/chromium.js";
export const SCREENSHOTS = join(process.cwd(), "scratch", "page-screenshots");

export async function screenshot(page: Page, name: string) {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core's violations of impact serious or critical on the page as it is now. */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  const source = readFileSync(
    createRequire(import.meta.url).resolve("axe-core/axe.min.js"),
    "utf8",
  );
  // Evaluated through the debugging protocol: the page's CSP (scripts from 'self' only) stays on.
  await page.evaluate(source);
  const violations = (await page.evaluate(
    `axe.run().then((r) => r.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })),
    })))`,
  )) as AxeViolation[];
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical");
}
