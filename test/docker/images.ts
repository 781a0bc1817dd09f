import { existsSync } from "node:fs";
import { DOCKER_CLI, docker, run } from "./engine.js";

// The project's images, built from its Dockerfile as a user would (BuildKit), tagged for the
// tests so that no image of the user's (headroom:local) is replaced.

export const APP_IMAGE = "headroom:test";
export const EMBEDDED_IMAGE = "headroom-clickhouse-embedded:test";
export const REDIS_IMAGE = "redis:7";

export interface Build {
  tag: string;
  seconds: number;
  bytes: number;
}

/**
 * `docker build` of the Dockerfile (a target of it). The extra CA certificate that npm uses on
 * this machine, if any, goes in as a BuildKit secret: the install steps read it, no layer keeps it.
 */
export async function buildImage(tag: string, target?: string): Promise<Build> {
  const args = ["build", "--tag", tag];
  const ca = process.env.NODE_EXTRA_CA_CERTS;
  if (ca && existsSync(ca)) args.push("--secret", `id=npmca,src=${ca}`);
  if (target) args.push("--target", target);
  args.push(".");
  const started = performance.now();
  await run(DOCKER_CLI, args, { env: { DOCKER_BUILDKIT: "1" }, timeoutMs: 15 * 60_000 });
  const seconds = (performance.now() - started) / 1000;
  const bytes = Number(await docker(["image", "inspect", "--format", "{{.Size}}", tag]));
  return { tag, seconds, bytes };
}

export function mb(bytes: number): string {
  return `${(bytes / 1e6).toFixed(0)} MB`;
}

/** A name no other run uses, for containers, networks and compose projects. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}

export async function healthStatus(container: string): Promise<string> {
  return docker(["inspect", "--format", "{{.State.Health.Status}}", container]);
}

/** The host address of a published port, e.g. 127.0.0.1:32768. */
export async function publishedAddress(container: string, port: number): Promise<string> {
  const out = await docker(["port", container, String(port)]);
  const line = out.split("\n").find((l) => l.startsWith("0.0.0.0:") || l.startsWith("127.0.0.1:"));
  if (!line) throw new Error(`port ${port} of ${container} is not published: ${out}`);
  return line.replace("0.0.0.0:", "127.0.0.1:");
}

/**
 * fetch with a deadline. A connection to a published port can be accepted by the engine's proxy
 * before the container listens, and then hang rather than fail: a poll must not wait on it.
 */
export function fetchWithin(url: string, init: RequestInit = {}, ms = 15_000): Promise<Response> {
  return fetch(url, { ...init, signal: AbortSignal.timeout(ms) });
}
