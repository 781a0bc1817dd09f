import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type FakeReadApi, fakeReadApi } from "../helpers/read-api-fakes.js";

// The page's routes (src/api/routes/page.ts) through buildApiApp, on a built page of the test's
// own: open without a key, served from memory, gzipped when asked, 304 on its tag, 404 otherwise.

const dir = mkdtempSync(join(tmpdir(), "headroom-page-"));
mkdirSync(join(dir, "assets"));
writeFileSync(join(dir, "index.html"), "<!doctype html><title>headroom</title>");
writeFileSync(join(dir, "assets", "app.js"), "console.log('headroom');");
writeFileSync(join(dir, "notes.txt"), "not a page file");

let api: FakeReadApi;
afterEach(async () => api?.app.close());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the page", () => {
  it("serves / and its files without a key, with its security headers", async () => {
    api = fakeReadApi({ pageDir: dir });
    const index = await api.app.inject({ url: "/" });
    expect(index.statusCode).toBe(200);
    expect(index.body).toBe("<!doctype html><title>headroom</title>");
    expect(index.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(index.headers["content-security-policy"]).toMatch(/default-src 'none'/);
    expect(index.headers["x-content-type-options"]).toBe("nosniff");
    const js = await api.app.inject({ url: "/page/assets/app.js" });
    expect(js.statusCode).toBe(200);
    expect(js.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(js.headers["content-security-policy"]).toBeUndefined();
  });

  it("answers gzip when asked, and 304 to the tag it gave", async () => {
    api = fakeReadApi({ pageDir: dir });
    const gz = await api.app.inject({ url: "/", headers: { "accept-encoding": "gzip, br" } });
    expect(gz.headers["content-encoding"]).toBe("gzip");
    expect(gunzipSync(gz.rawPayload).toString()).toBe("<!doctype html><title>headroom</title>");
    const again = await api.app.inject({
      url: "/",
      headers: { "if-none-match": gz.headers.etag as string },
    });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe("");
  });

  it("answers 404 to a file it does not serve, and / when the page is not built", async () => {
    api = fakeReadApi({ pageDir: dir });
    for (const url of [
      "/page/notes.txt",
      "/page/index.html",
      "/page/../index.html",
      "/page/x.js",
    ]) {
      const res = await api.app.inject({ url });
      expect(res.statusCode, url).toBe(404);
    }
    await api.app.close();
    api = fakeReadApi({ pageDir: join(dir, "assets") });
    expect((await api.app.inject({ url: "/" })).statusCode).toBe(404);
  });
});
