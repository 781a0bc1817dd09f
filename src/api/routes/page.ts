import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { extname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { HttpError } from "../../http/errors.js";
import { matchesEtag } from "../encoded-answer.js";

// The headroom page: `/` and its files under `/page/`, built into dist/page (bin/build-page.mjs).
// They are read and gzipped once, when the app is built, and served from memory. The page reads
// only the read API, with the key the browser holds: no key ever reaches these routes.

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

// uPlot sets inline styles on its elements; scripts and everything else come from here only.
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer;
  etag: string;
}

/** dist/page beside the compiled sources, or under the checkout when run from the sources. */
export function defaultPageDir(): string {
  const base = fileURLToPath(new URL("../../../", import.meta.url));
  return base.replace(/[\\/]$/, "").endsWith(`${sep}dist`)
    ? join(base, "page")
    : join(base, "dist", "page");
}

export function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  const walk = (at: string) => {
    for (const name of readdirSync(at)) {
      const path = join(at, name);
      if (statSync(path).isDirectory()) walk(path);
      else {
        const type = TYPES[extname(name)];
        if (!type) continue;
        const body = readFileSync(path);
        const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`;
        assets.set(relative(dir, path).split(sep).join("/"), {
          type,
          body,
          gzip: gzipSync(body, { level: 9 }),
          etag,
        });
      }
    }
  };
  walk(dir);
  return assets;
}

function send(req: FastifyRequest, reply: FastifyReply, asset: Asset) {
  reply
    .header("content-type", asset.type)
    .header("etag", asset.etag)
    // Names carry no hash: the browser asks again each load, and a 304 costs nothing.
    .header("cache-control", "no-cache")
    .header("vary", "accept-encoding")
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer");
  if (asset.type.startsWith("text/html")) reply.header("content-security-policy", CSP);
  if (matchesEtag(req.headers["if-none-match"], asset.etag)) return reply.code(304).send();
  if (/\bgzip\b/.test(req.headers["accept-encoding"] ?? "")) {
    return reply.header("content-encoding", "gzip").send(asset.gzip);
  }
  return reply.send(asset.body);
}

export const pageRoutes: FastifyPluginAsync<{ dir: string }> = async (app, { dir }) => {
  if (!existsSync(join(dir, "index.html"))) {
    app.log.warn({ dir }, "the page is not built (npm run build): / answers 404");
    return;
  }
  const assets = loadAssets(dir);
  const index = assets.get("index.html") as Asset;
  app.get("/", (req, reply) => send(req, reply, index));
  app.get<{ Params: { "*": string } }>("/page/*", (req, reply) => {
    const asset = assets.get(req.params["*"]);
    if (!asset || req.params["*"] === "index.html") {
      throw new HttpError("not_found", "no such file of the page");
    }
    return send(req, reply, asset);
  });
};
