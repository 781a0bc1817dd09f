import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { z } from "zod";
import { backupRedis, backupSchema, restoreRedis, storedKeys } from "./backup.js";
import { mergeRedis } from "./backup-merge.js";
import { cliConfig } from "./context.js";
import { UsageError } from "./errors.js";
import { closeRedis, connectRedis } from "./redis.js";

// `headroom backup FILE` and `headroom restore FILE`: keys, plans, alert rules and their secrets.
// FILE `-` is standard output / input, for `docker compose exec -T … backup - > file`.

const STDIO = "-";

export async function backupCommand(file: string): Promise<void> {
  const config = cliConfig();
  const redis = await connectRedis(config);
  try {
    const backup = await backupRedis(redis, config.QUEUE_PREFIX);
    const text = `${JSON.stringify(backup, null, 1)}\n`;
    // It holds webhook signing secrets: readable by its owner only.
    if (file === STDIO) process.stdout.write(text);
    else {
      // `mode` applies to a file made now: one that is there already is made private first.
      if (existsSync(file)) chmodSync(file, 0o600);
      writeFileSync(file, text, { mode: 0o600 });
    }
    process.stderr.write(
      `backed up ${backup.keys.length} keys: keep the file off this host, it holds secrets\n`,
    );
  } finally {
    await closeRedis(redis);
  }
}

export async function restoreCommand(file: string, opts: { merge?: boolean } = {}): Promise<void> {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file === STDIO ? 0 : file, "utf8"));
  } catch (err) {
    throw new UsageError(`${file}: ${(err as Error).message}`);
  }
  const parsed = backupSchema.safeParse(json);
  if (!parsed.success) {
    throw new UsageError(`${file} is not a Headroom backup: ${z.prettifyError(parsed.error)}`);
  }
  const config = cliConfig();
  const redis = await connectRedis(config);
  try {
    const taken = `from ${file} (taken ${parsed.data.created_at})`;
    if (opts.merge) {
      const { written, skipped } = await mergeRedis(redis, parsed.data, config.QUEUE_PREFIX);
      process.stdout.write(`merged ${written} keys ${taken}\n`);
      for (const line of skipped) process.stdout.write(`skipped ${line}\n`);
      return;
    }
    // Written over a Redis in use, the backup would undo what was done since: revoked keys
    // would work again, removed rules fire again, old plans come back.
    const present = await storedKeys(redis, config.QUEUE_PREFIX);
    if (present > 0) {
      throw new UsageError(
        `this Redis is not empty (${present} keys of projects, keys or alert rules): restore ` +
          "writes into an empty one. Use --merge to add only what it lacks, keeping the " +
          "revocations, rule removals and plan changes made since the backup",
      );
    }
    const restored = await restoreRedis(redis, parsed.data);
    process.stdout.write(`restored ${restored} keys ${taken}\n`);
  } finally {
    await closeRedis(redis);
  }
}
