import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { type AuthDeps, createAuthenticate } from "../../http/authenticate.js";
import { requireScope } from "../../http/scope.js";
import type { Scope } from "../../keys/key-format.js";
import type { KeyLookup } from "../../keys/key-store.js";
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
  // Declared once on every request (the read and advice scopes share it): setting it per request
  // keeps the request object's shape.
  if (!app.hasRequestDecorator("project")) app.decorateRequest("project", undefined);
  const scopes = deps.scopes ?? "read";
  const admit = (req: FastifyRequest, lookup: KeyLookup): undefined | Promise<void> => {
    requireScope(lookup, scopes);
    const limited = deps.readLimit(lookup);
    if (!limited) {
      req.project = lookup;
      return undefined;
    }
    return limited.then(() => {
      req.project = lookup;
    });
  };
  // Callback style: a key the cache knows, with a read token in hand (most requests), passes
  // without a promise; the others wait for theirs.
  app.addHook("onRequest", (req, _reply, done) => {
    let pending: undefined | Promise<void>;
    try {
      const found = authenticate(req);
      pending = found instanceof Promise ? found.then((l) => admit(req, l)) : admit(req, found);
    } catch (err) {
      done(err as Error);
      return;
    }
    if (!pending) done();
    else pending.then(() => done(), done);
  });
};

/** Registered inside a scope holding the read routes: the health routes stay open. */
export const readAuth = fp(plugin, { name: "read-auth" });
