import type { FastifyInstance } from "fastify";
import { HttpError } from "./errors.js";

// A path that takes only POST answers every other method 405 with `Allow: POST`, not 404: the
// path exists, the method is wrong.

export function refuseOtherMethods(app: FastifyInstance, url: string): void {
  app.route({
    method: ["GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS"],
    url,
    exposeHeadRoute: false,
    handler: async () => {
      throw new HttpError("method_not_allowed", "use POST", { headers: { allow: "POST" } });
    },
  });
}
