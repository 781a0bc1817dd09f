import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { verify } from "../../src/alerts/signing.js";

// A webhook receiver on 127.0.0.1, as a customer would run one: it checks each delivery's
// Standard Webhooks signature with the rule's secret and records what it got. It can be taken
// down (connections refused) and brought back on the same port, made to answer an error, or
// made to never answer (each request held open until the receiver closes).

export interface Delivery {
  id: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: { type: string; timestamp: string; data: Record<string, unknown> };
  valid: boolean;
  /** The status this receiver answered; null when it never answered. */
  answered: number | null;
  /** When it arrived (ms). */
  at: number;
}

export async function startReceiver(secret: () => string | undefined) {
  const deliveries: Delivery[] = [];
  let status: number | null = 200;
  let server: Server | undefined;
  let port = 0;

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          const body = Buffer.concat(chunks).toString("utf8");
          const key = secret();
          deliveries.push({
            id: String(req.headers["webhook-id"]),
            headers: req.headers,
            body,
            json: JSON.parse(body),
            valid: key !== undefined && verify(key, req.headers, body),
            answered: status,
            at: Date.now(),
          });
          if (status !== null) {
            res.writeHead(status, { "content-type": "application/json" }).end("{}");
          }
        });
      });
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => {
        port = (s.address() as AddressInfo).port;
        server = s;
        resolve();
      });
    });

  await listen();
  return {
    deliveries,
    get url() {
      return `http://127.0.0.1:${port}/hooks/headroom`;
    },
    /** Accepted deliveries (answered 2xx) in arrival order. */
    accepted: () => deliveries.filter((d) => d.answered !== null && d.answered < 300),
    /** The status to answer from now on; null: hold each request open, never answering. */
    answer(code: number | null) {
      status = code;
    },
    /** Refuses connections from now on. */
    async down() {
      const s = server;
      server = undefined;
      if (!s) return;
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    },
    /** Listens again on the same port. */
    async up() {
      if (!server) await listen();
    },
    close() {
      return this.down();
    },
  };
}

export type Receiver = Awaited<ReturnType<typeof startReceiver>>;
