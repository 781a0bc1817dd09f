import { readFileSync } from "node:fs";
import { join } from "node:path";
import { launchChromium } from "./chromium.js";

// The headroom page's weight and speed on a running stack (`npm start`), in Debian's chromium:
// the script it loads (bytes on the wire, gzip as served, and uncompressed) and the time from
// navigation to the first figures on screen, over several fresh loads (no cache).
//   npm run bench:page                       # the local stack, key from .data/local-key.json
//   npm run bench:page -- http://host:3001/ hrr_…

const LOADS = 7;

const [urlArg, keyArg] = process.argv.slice(2);
const dataDir = process.env.HEADROOM_DATA_DIR ?? ".data";
const key =
  keyArg ??
  (JSON.parse(readFileSync(join(dataDir, "local-key.json"), "utf8")) as { read_key: string })
    .read_key;
const url = urlArg ?? `http://127.0.0.1:${process.env.API_PORT ?? 3001}/`;

const browser = await launchChromium();
try {
  const times: number[] = [];
  let wire = 0;
  let raw = 0;
  for (let i = 0; i < LOADS; i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const scripts: Promise<void>[] = [];
    let loadWire = 0;
    let loadRaw = 0;
    page.on("response", (res) => {
      if (!res.url().endsWith(".js")) return;
      scripts.push(
        res.body().then((body) => {
          loadRaw += body.length;
          loadWire += Number(res.headers()["content-length"] ?? body.length);
        }),
      );
    });
    await page.goto(`${url}#key=${encodeURIComponent(key)}`);
    await page.waitForSelector("html[data-first-figures-ms]", { timeout: 30_000 });
    times.push(Number(await page.evaluate("document.documentElement.dataset.firstFiguresMs")));
    await Promise.all(scripts);
    wire = loadWire;
    raw = loadRaw;
    await context.close();
  }
  times.sort((a, b) => a - b);
  const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
  process.stdout.write(
    `${url}: script ${kb(wire)} on the wire (gzip), ${kb(raw)} uncompressed; first figures after ` +
      `${times[Math.floor(times.length / 2)]} ms (median of ${LOADS} fresh loads; ` +
      `${times[0]}–${times[times.length - 1]} ms)\n`,
  );
} finally {
  await browser.close();
}
