import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

// The running local stack's addresses (and generated credentials), for the CLI: `npm start`
// writes them to stack.json in HEADROOM_DATA_DIR and removes the file when it stops;
// `headroom …` reads them from there.

export type StackAddresses = Record<string, string>;

export const stackFilePath = (dataDir: string) => join(dataDir, "stack.json");

export function writeStackFile(dataDir: string, addresses: StackAddresses): void {
  // It may carry the embedded ClickHouse's password: readable by its owner only.
  const file = stackFilePath(dataDir);
  writeFileSync(file, `${JSON.stringify(addresses, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
}

export function readStackFile(dataDir: string): StackAddresses | undefined {
  const file = stackFilePath(dataDir);
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, "utf8")) as StackAddresses;
}

export function removeStackFile(dataDir: string): void {
  rmSync(stackFilePath(dataDir), { force: true });
}
