import fc from "fast-check";
import { beforeEach } from "vitest";

// Every property and every fc.sample in a run draws from one seed (vitest.config.ts sets
// FC_SEED), so a failure replays exactly with the same FC_SEED. fast-check's own failure
// message names the seed too; this also covers tests that only sample values.

const seed = Number(process.env.FC_SEED);
if (Number.isInteger(seed)) fc.configureGlobal({ ...fc.readConfigureGlobal(), seed });

beforeEach(({ onTestFailed }) => {
  onTestFailed(() => {
    console.error(`fast-check seed ${seed}: replay with FC_SEED=${seed}`);
  });
});
