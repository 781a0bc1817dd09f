import { createServer, type Server } from "node:http";
import type { Registry } from "prom-client";

// A worker process's /metrics and /healthz on a port of its own; port 0 picks a free port.
// /healthz answers 503 with the reason while `health` says the process is stuck.

export async function serveMetrics(
  registry: Registry,
  host: string,
  port: number,
  health: () => { ok: boolean; reason?: string } = () => ({ ok: true }),
): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    if (req.url === "/metrics") {
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { "content-type": registry.contentType });
          res.end(text);
        },
        () => {
          res.writeHead(500);
          res.end();
        },
      );
    } else if (req.url === "/healthz") {
      const h = health();
      res.writeHead(h.ok ? 200 : 503, { "content-type": "application/json" });
      res.end(JSON.stringify(h.ok ? { status: "ok" } : { status: "stuck", reason: h.reason }));
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  return { server, port: typeof address === "object" && address ? address.port : port };
}
