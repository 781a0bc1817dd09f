import fp from "fastify-plugin";
import { HttpError } from "../../http/errors.js";
import { parseJsonBody } from "../parse-report.js";

// Our own JSON parser: raw bytes in, so that invalid UTF-8, empty bodies and prototype keys get
// the contract's errors. Other media types fall through to Fastify's 415.

const CHARSET = /charset\s*=\s*"?([^";\s]+)/i;

export const jsonBody = fp<{ bodyLimit: number }>(
  async (app, { bodyLimit }) => {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser(
      "application/json",
      { parseAs: "buffer", bodyLimit },
      (req, body, done) => {
        const charset = CHARSET.exec(req.headers["content-type"] ?? "")?.[1];
        if (charset && !/^utf-?8$/i.test(charset)) {
          done(
            new HttpError("unsupported_media_type", `charset ${charset} is not supported`),
            undefined,
          );
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
