import { describe, expect, it } from "vitest";
import {
  type Answer,
  createIdempotency,
  type IdempotencyRecords,
  type IdempotentRequest,
} from "../../src/api/control/idempotency.js";
import { HttpError } from "../../src/http/errors.js";

// Idempotency-Key over in-memory records behind its own interface (IdempotencyRecords); the
// Redis records are tested in control.idempotency. Each behaviour of docs/control-plane.md's
// "Idempotency-Key", its bounds at their literal values.

function memoryRecords(): IdempotencyRecords & { values: Map<string, string> } {
  const values = new Map<string, string>();
  return {
    values,
    async take(key, value) {
      if (values.has(key)) return false;
      values.set(key, value);
      return true;
    },
    get: async (key) => values.get(key) ?? null,
    async put(key, value) {
      values.set(key, value);
    },
    async free(key) {
      values.delete(key);
    },
    async count(counter) {
      const n = Number(values.get(counter) ?? 0) + 1;
      values.set(counter, String(n));
      return n;
    },
    ttl: async () => 3_600,
  };
}

function setup(opts: { maxRecords?: number } = {}) {
  const records = memoryRecords();
  const idempotent = createIdempotency(records, { waitMs: 2_000, ...opts });
  let runs = 0;
  const request = (over: Partial<IdempotentRequest> = {}): IdempotentRequest => ({
    header: "k-1",
    credentialId: "key_a",
    credentialSecret: "hrm_secret_a",
    request: { method: "POST", url: "/api/v1/projects/p/keys", body: { scope: "report" } },
    run: async (): Promise<Answer> => {
      runs += 1;
      return { status: 201, body: { key: `hr_secret_${runs}` } };
    },
    ...over,
  });
  return { records, idempotent, request, runs: () => runs };
}

const refusedWith = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HttpError);
  return err as HttpError;
};

describe("Idempotency-Key", () => {
  it("without one, every request runs", async () => {
    const { idempotent, request, runs } = setup();
    await idempotent(request({ header: undefined }));
    const second = await idempotent(request({ header: undefined }));
    expect(second.replayed).toBe(false);
    expect(runs()).toBe(2);
  });

  it("the same key, credential and request again: the first answer, replayed, nothing run twice", async () => {
    const { idempotent, request, runs } = setup();
    const first = await idempotent(request());
    const again = await idempotent(request());
    expect(first).toEqual({ status: 201, body: { key: "hr_secret_1" }, replayed: false });
    expect(again).toEqual({ status: 201, body: { key: "hr_secret_1" }, replayed: true });
    expect(runs()).toBe(1);
  });

  it("retries at once get one run and one answer", async () => {
    const { idempotent, request, runs } = setup();
    const answers = await Promise.all([idempotent(request()), idempotent(request())]);
    expect(runs()).toBe(1);
    expect(answers.map((a) => a.body)).toEqual([{ key: "hr_secret_1" }, { key: "hr_secret_1" }]);
    expect(answers.map((a) => a.replayed).sort()).toEqual([false, true]);
  });

  it("the same key with another body, method or path is a 422", async () => {
    const { idempotent, request } = setup();
    await idempotent(request());
    for (const other of [
      { method: "POST", url: "/api/v1/projects/p/keys", body: { scope: "read" } },
      { method: "PUT", url: "/api/v1/projects/p/keys", body: { scope: "report" } },
      { method: "POST", url: "/api/v1/projects/q/keys", body: { scope: "report" } },
    ]) {
      const err = await refusedWith(idempotent(request({ request: other })));
      expect(err.code).toBe("idempotency_key_reused");
      expect(err.status).toBe(422);
    }
  });

  it("keys are per credential; another secret of the same credential cannot read the answer", async () => {
    const { idempotent, request, runs } = setup();
    await idempotent(request());
    const other = await idempotent(request({ credentialId: "key_b" }));
    expect(other.replayed).toBe(false);
    expect(runs()).toBe(2);
    const rotated = await refusedWith(idempotent(request({ credentialSecret: "hrm_new" })));
    expect(rotated.status).toBe(422);
  });

  it("keeps no answer in the clear", async () => {
    const { records, idempotent, request } = setup();
    await idempotent(request());
    const stored = [...records.values.values()].join("\n");
    expect(stored).not.toContain("hr_secret_1");
    expect(stored).not.toContain("hrm_secret_a");
  });

  it("a refusal under 500 of at most 4 KiB is an answer, replayed; a longer one or a 5xx frees the key", async () => {
    const { idempotent, request } = setup();
    let runs = 0;
    const refuse = (message: string, code: "not_found" | "internal") => async () => {
      runs += 1;
      throw new HttpError(code, message);
    };
    const small = request({ header: "small", run: refuse("no rule", "not_found") });
    expect((await refusedWith(idempotent(small))).status).toBe(404);
    expect(await idempotent(small)).toMatchObject({ status: 404, replayed: true });
    expect(runs).toBe(1);

    // A body of 4,097 bytes or more is not kept: the retry runs.
    const big = request({ header: "big", run: refuse("x".repeat(4_096), "not_found") });
    await refusedWith(idempotent(big));
    await refusedWith(idempotent(big));
    expect(runs).toBe(3);
    const failed = request({ header: "5xx", run: refuse("down", "internal") });
    await refusedWith(idempotent(failed));
    await refusedWith(idempotent(failed));
    expect(runs).toBe(5);
  });

  it("one credential makes at most its bound of records; past it a 429 with Retry-After", async () => {
    const { idempotent, request, records } = setup({ maxRecords: 2 });
    await idempotent(request({ header: "a" }));
    await idempotent(request({ header: "b" }));
    const err = await refusedWith(idempotent(request({ header: "c" })));
    expect(err.status).toBe(429);
    expect(err.extra.headers?.["retry-after"]).toBe(3_600);
    // Its record is let go, not left pending.
    expect([...records.values.keys()].filter((k) => k.includes(":idempotency:"))).toHaveLength(2);
  });

  it("the bound is 10,000 records a day by default", async () => {
    const { MAX_RECORDS_PER_CREDENTIAL, IDEMPOTENCY_TTL_S, MAX_REFUSAL_BYTES } = await import(
      "../../src/api/control/idempotency.js"
    );
    expect([MAX_RECORDS_PER_CREDENTIAL, IDEMPOTENCY_TTL_S, MAX_REFUSAL_BYTES]).toEqual([
      10_000, 86_400, 4_096,
    ]);
  });

  it("a key is one header of 1-255 visible ASCII characters", async () => {
    const { idempotent, request } = setup();
    for (const header of ["", "a b", "é", "x".repeat(256), ["a", "b"]]) {
      const err = await refusedWith(idempotent(request({ header })));
      expect(err.code).toBe("invalid_request");
    }
    expect((await idempotent(request({ header: "x".repeat(255) }))).status).toBe(201);
  });
});
