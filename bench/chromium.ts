import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

// A real browser for the page's benchmark and its tests: Debian's chromium, driven by
// playwright-core through its executable (no browser download).

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `the page's browser tests need chromium at ${CHROMIUM}: install it (Debian: apt-get install -y --no-install-recommends chromium) or set CHROMIUM_PATH`,
    );
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
}
