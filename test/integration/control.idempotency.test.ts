import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createIdempotency, MAX_REFUSAL_BYTES } from "../../src/api/control/idempotency.js";
import { HttpError } from "../../src/http/errors.js";
import { type ControlStack, startControlStack } from "../helpers/control-stack.js";

// Idempotency-Key on the control plane's POSTs: a retried create makes one project or key and
// gets the same answer (the same secret), sequential or concurrent; the same key with another
// body is a 422; keys are per credential.

let s: ControlStack;
let admin: string;
let otherAdmin: string;
let n = 0;

beforeAll(async () => {
  s = await startControlStack(11);
  admin = (await s.control.createKey(s.cli, null, { scope: "admin" })).key;
  otherAdmin = (await s.control.createKey(s.cli, null, { scope: "admin" })).key;
}, 120_000);

afterAll(async () => {
  await s?.close();
});

const newProject = () => `c-${s.tag}-${++n}`;
const idem = (key: string) => ({ "idempotency-key": key });

describe("Idempotency-Key", () => {
  it("a retried project create makes one project and replays the first answer", async () => {
    const project = newProject();
    const body = { project, plan: "pro" };
    const first = await s.call("POST", "/api/v1/projects", admin, body, idem(`p-${project}`));
    expect(first.statusCode, first.body).toBe(201);
    expect(first.headers["idempotent-replayed"]).toBeUndefined();
    const again = await s.call("POST", "/api/v1/projects", admin, body, idem(`p-${project}`));
    expect(again.statusCode).toBe(201);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(again.json()).toEqual(first.json());
    // Without the header, the same body is a new request: the project exists.
    const plain = await s.call("POST", "/api/v1/projects", admin, body);
    expect(plain.statusCode).toBe(409);
    expect(plain.json().error).toBe("conflict");
  });

  it("a retried key create makes one key, and the retry gets the same secret", async () => {
    const project = newProject();
    await s.control.createProject(s.cli, { project });
    const url = `/api/v1/projects/${project}/keys`;
    const first = await s.call("POST", url, admin, { scope: "read" }, idem("k-1"));
    const again = await s.call("POST", url, admin, { scope: "read" }, idem("k-1"));
    expect(first.statusCode).toBe(201);
    expect(again.json()).toEqual(first.json());
    expect(again.json().key).toMatch(/^hrr_/);
    expect(await s.control.listKeys(s.cli, project)).toHaveLength(1);
  });

  it("concurrent retries give one key and one answer", async () => {
    const project = newProject();
    await s.control.createProject(s.cli, { project });
    const url = `/api/v1/projects/${project}/keys`;
    const answers = await Promise.all(
      Array.from({ length: 12 }, () =>
        s.call("POST", url, admin, { scope: "report" }, idem("c-1")),
      ),
    );
    for (const a of answers) expect(a.statusCode, a.body).toBe(201);
    const bodies = new Set(answers.map((a) => a.body));
    expect(bodies.size).toBe(1);
    expect(answers.filter((a) => a.headers["idempotent-replayed"] === undefined)).toHaveLength(1);
    expect(await s.control.listKeys(s.cli, project)).toHaveLength(1);
  });

  it("concurrent retries of a project create give one project", async () => {
    const project = newProject();
    const answers = await Promise.all(
      Array.from({ length: 8 }, () =>
        s.call("POST", "/api/v1/projects", admin, { project }, idem(`cp-${project}`)),
      ),
    );
    expect(answers.map((a) => a.statusCode)).toEqual(answers.map(() => 201));
    expect(new Set(answers.map((a) => a.body)).size).toBe(1);
    const audit = await s.control.readAudit(s.cli, { project, limit: 100 });
    expect(audit.filter((r) => r.entry.action === "project.create")).toHaveLength(1);
  });

  it("the same key with another body is a 422 and changes nothing", async () => {
    const project = newProject();
    await s.control.createProject(s.cli, { project });
    const url = `/api/v1/projects/${project}/keys`;
    expect((await s.call("POST", url, admin, { scope: "read" }, idem("m-1"))).statusCode).toBe(201);
    const other = await s.call("POST", url, admin, { scope: "report" }, idem("m-1"));
    expect(other.statusCode).toBe(422);
    expect(other.json().error).toBe("idempotency_key_reused");
    // And on another path.
    const elsewhere = await s.call("POST", "/api/v1/projects", admin, { project }, idem("m-1"));
    expect(elsewhere.statusCode).toBe(422);
    expect(await s.control.listKeys(s.cli, project)).toHaveLength(1);
  });

  it("keys are per credential: another admin key's same Idempotency-Key is its own", async () => {
    const project = newProject();
    await s.control.createProject(s.cli, { project });
    const url = `/api/v1/projects/${project}/keys`;
    const mine = await s.call("POST", url, admin, {}, idem("shared"));
    const theirs = await s.call("POST", url, otherAdmin, {}, idem("shared"));
    expect(mine.statusCode).toBe(201);
    expect(theirs.statusCode).toBe(201);
    expect(theirs.headers["idempotent-replayed"]).toBeUndefined();
    expect(theirs.json().key_id).not.toBe(mine.json().key_id);
    expect(await s.control.listKeys(s.cli, project)).toHaveLength(2);
  });

  it("a refusal is an answer too: replayed, not run again", async () => {
    const project = newProject();
    const first = await s.call(
      "POST",
      "/api/v1/projects",
      admin,
      { project, plan: "nope" },
      idem("r-1"),
    );
    expect(first.statusCode).toBe(400);
    const again = await s.call(
      "POST",
      "/api/v1/projects",
      admin,
      { project, plan: "nope" },
      idem("r-1"),
    );
    expect(again.statusCode).toBe(400);
    expect(again.headers["idempotent-replayed"]).toBe("true");
    expect(again.json()).toEqual(first.json());
  });

  it("a stored answer holds no secret in the clear", async () => {
    const project = newProject();
    await s.control.createProject(s.cli, { project });
    const made = await s.call("POST", `/api/v1/projects/${project}/keys`, admin, {}, idem("x-1"));
    const secret = made.json().key as string;
    const records = await s.redis.keys("headroom:idempotency:*");
    expect(records.length).toBeGreaterThan(0);
    for (const k of records) expect(await s.redis.get(k)).not.toContain(secret);
  });

  it("keeps a refusal only up to its bound, and a credential's records up to theirs", async () => {
    const idempotent = createIdempotency(s.redis, { maxRecords: 4 });
    const credential = `cred-${Date.now()}`;
    let runs = 0;
    const refuse = (size: number) => async () => {
      runs++;
      throw new HttpError("invalid_body", "x".repeat(size));
    };
    const send = (header: string, run: () => Promise<{ status: number; body: unknown }>) =>
      idempotent({
        header,
        credentialId: credential,
        credentialSecret: "secret",
        request: { method: "POST", url: "/api/v1/projects", body: { header } },
        run,
      });
    // A small refusal is kept and replayed; a big one frees its key, so the retry runs again.
    await expect(send("small", refuse(10))).rejects.toThrow(HttpError);
    await expect(send("small", refuse(10))).resolves.toMatchObject({ status: 400, replayed: true });
    expect(runs).toBe(1);
    await expect(send("big", refuse(MAX_REFUSAL_BYTES))).rejects.toThrow(HttpError);
    await expect(send("big", refuse(MAX_REFUSAL_BYTES))).rejects.toThrow(HttpError);
    expect(runs).toBe(3);
    expect(await s.redis.keys(`*idempotency:${credential}:*`)).toHaveLength(1);
    // Four records taken a day for this credential (a freed one counts: it ran): the fifth is
    // refused, and not kept.
    await send("third", async () => ({ status: 201, body: {} }));
    const over = send("fourth", async () => ({ status: 201, body: {} }));
    await expect(over).rejects.toMatchObject({ code: "rate_limited", status: 429 });
    expect(await s.redis.keys(`*idempotency:${credential}:*`)).toHaveLength(2);
    // A replay of a kept record is not a new one.
    await expect(send("third", async () => ({ status: 201, body: {} }))).resolves.toMatchObject({
      replayed: true,
    });
  });
});
