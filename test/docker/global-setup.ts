import type { TestProject } from "vitest/node";
import { acquireEngine, releaseEngine } from "./engine.js";

// The container tests need a Docker engine and the base images the Dockerfile and the compose
// override name (built offline when missing). No engine is a failure, never a skip: the message
// says what to install.

declare module "vitest" {
  interface ProvidedContext {
    dockerHost: string;
  }
}

export default async function setup(project: TestProject) {
  const engine = await acquireEngine(["node", "redis"]);
  project.provide("dockerHost", engine.dockerHost);
  return async () => {
    await releaseEngine();
  };
}
