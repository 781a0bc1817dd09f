import { readFileSync } from "node:fs";
import Fastify from "fastify";

// The edge's ceiling: a bare Fastify server on the same machine, answering the same POST with
// 200 {"id":"x"} after Fastify's own JSON parsing — no auth, limits, validation or Redis. Port in
// argv[2] (0 picks one); prints "bare ready <port>". Exits on SIGTERM or when stdin closes.
// With a CapturedAnswer's file in argv[3], it also answers GET at its path with its bytes and
// headers (the read API's ceiling: the same answer, none of the work of making it).

export interface CapturedAnswer {
  path: string;
  headers: Record<string, string>;
  bodyBase64: string;
}

const app = Fastify({ logger: false, bodyLimit: 32 * 1024 });
app.post("/api/report", async () => ({ id: "x" }));
if (process.argv[3]) {
  const answer = JSON.parse(readFileSync(process.argv[3], "utf8")) as CapturedAnswer;
  const body = Buffer.from(answer.bodyBase64, "base64");
  // The route is the path without its query (advice's ?provider=…&model=…), as wrk asks it.
  app.get(answer.path.split("?")[0] as string, (_req, reply) =>
    reply.headers(answer.headers).send(body),
  );
}

const address = await app.listen({ host: "127.0.0.1", port: Number(process.argv[2] ?? 0) });
process.stdout.write(`bare ready ${new URL(address).port}\n`);

const stop = () => {
  void app.close().finally(() => process.exit(0));
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
process.stdin.on("end", stop);
process.stdin.resume();
