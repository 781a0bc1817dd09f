import type { FastifyPluginAsync } from "fastify";
import fp from "fastify-plugin";
import { type AuthDeps, createAuthenticate } from "../../http/authenticate.js";
import { requireScope } from "../../http/scope.js";
import type { Scope } from "../../keys/key-format.js";
import type { ReadLimit } from "../read-limit.js";

// Every read route: the key (as the edge checks it), its scope (read keys only), then the key's
// read limit. The route's handler finds the key's project on `req.project`.

export interface ReadAuthDeps extends AuthDeps {
  readLimit: ReadLimit;
  /** The scopes let in: read keys, unless a route says more (advice: report keys too). */
  scopes?: readonly Scope[];
}

const plugin: FastifyPluginAsync<ReadAuthDeps> = async (app, deps) => {
  const authenticate = createAuthenticate({ ...deps, keyName: "read key" });
  app.addHook("onRequest", async (req) => {
    const lookup = await authenticate(req);
    requireScope(lookup, deps.scopes ?? "read");
    await deps.readLimit(lookup);
    req.project = lookup;
  });
};

/** Registered inside a scope holding the read routes: the health routes stay open. */
export const readAuth = fp(plugin, { name: "read-auth" });
