import { InvalidArgumentError } from "commander";
import { describe, expect, it } from "vitest";
import { limitFlag, poolFlag } from "../../src/cli/declaration-flags.js";

// `--limit` and `--pool` of `headroom limits|pools set`: read from the right, since a model's
// name may hold `/` and `:`; checked by the same schemas as the control plane's bodies.

describe("--limit", () => {
  it("reads provider/model:dimension:window=limit, a model with / and : included", () => {
    expect(limitFlag("bedrock/anthropic.claude-3-haiku-20240307-v1:0:requests:1m=60")).toEqual([
      {
        provider: "bedrock",
        model: "anthropic.claude-3-haiku-20240307-v1:0",
        pool: null,
        dimension: "requests",
        window: "1m",
        limit: 60,
      },
    ]);
    expect(limitFlag("openrouter/meta-llama/llama-3.1-70b:tokens:1d=100000")[0]?.model).toBe(
      "meta-llama/llama-3.1-70b",
    );
  });

  it("reads a pool after #, and repeats into a list", () => {
    const one = limitFlag("openai/gpt-4o#openai-prod:tokens:1m=30000");
    expect(one[0]).toMatchObject({ model: "gpt-4o", pool: "openai-prod", limit: 30_000 });
    expect(limitFlag("deepseek/deepseek-chat:requests:1d=10", one)).toHaveLength(2);
  });

  it("refuses a negative limit, an unknown window or dimension, a malformed spec", () => {
    for (const bad of [
      "bedrock/m:requests:1m=-1",
      "bedrock/m:requests:1m=0",
      "bedrock/m:requests:2m=60",
      "bedrock/m:credits:1m=60",
      "bedrock:requests:1m=60",
      "bedrock/m:requests=60",
      "bedrock/m:requests:1m=lots",
    ]) {
      expect(() => limitFlag(bad), bad).toThrow(InvalidArgumentError);
    }
  });
});

describe("--pool", () => {
  it("reads provider:label=app,app", () => {
    expect(poolFlag("openai:openai-prod=chat, agent")).toEqual([
      { provider: "openai", label: "openai-prod", apps: ["chat", "agent"] },
    ]);
  });

  it("refuses no apps, a bad label, a malformed spec", () => {
    for (const bad of ["openai:prod=", "openai:pr od=chat", "openai=chat", "openai-prod"]) {
      expect(() => poolFlag(bad), bad).toThrow(InvalidArgumentError);
    }
  });
});
