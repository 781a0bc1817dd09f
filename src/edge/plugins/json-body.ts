import fp from "fastify-plugin";
import { charsetRefusal } from "../content-charset.js";
import { parseJsonBody } from "../parse-report.js";

// Our own JSON parser: raw bytes in, so that invalid UTF-8, empty bodies and prototype keys get
// the contract's errors. Other media types fall through to Fastify's 415.

export const jsonBody = fp<{ bodyLimit: number }>(
  async (app, { bodyLimit }) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser(
      "application/json",
      { parseAs: "buffer", bodyLimit },
      (req, body, done) => {
        const refusal = charsetRefusal(req.headers["content-type"]);
        if (refusal) {
          done(refusal, undefined);
          return;
        }
        try {
          done(null, parseJsonBody(body as Buffer));
        } catch (err) {
          done(err as Error, undefined);
        }
      },
    );
  },
  { name: "json-body" },
);
