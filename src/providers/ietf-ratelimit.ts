import { dimensionName, type HeaderReader, windowOfSeconds } from "./read-headers.js";

// The IETF rate-limit fields (draft-ietf-httpapi-ratelimit-headers), in the three shapes its
// drafts have had:
// - `RateLimit-Limit: 100, 100;w=60` + `RateLimit-Remaining: 50` + `RateLimit-Reset: 30` (early);
// - `RateLimit-Policy: 100;w=60` + `RateLimit: limit=100, remaining=50, reset=30` (draft 7);
// - `RateLimit-Policy: "hour";q=100;w=3600;qu="requests"` + `RateLimit: "hour";r=50;t=30`
//   (structured fields, draft 8 on).
// Resets are seconds from the answer; `w` is the window in seconds; `qu` the quota unit.

interface Item {
  token: string;
  params: Map<string, string>;
}

const unquote = (s: string) => s.trim().replace(/^"(.*)"$/, "$1");

/** A comma-separated list of `token;key=value;…` items (quoted commas are not expected here). */
function items(value: string): Item[] {
  return value
    .split(",")
    .map((part) => part.split(";"))
    .map(([token = "", ...params]) => ({
      token: unquote(token),
      params: new Map(
        params.map((p) => {
          const eq = p.indexOf("=");
          return eq < 0
            ? [p.trim().toLowerCase(), ""]
            : [p.slice(0, eq).trim().toLowerCase(), unquote(p.slice(eq + 1))];
        }),
      ),
    }))
    .filter((item) => item.token !== "" || item.params.size > 0);
}

const lengthOf = (w: string | undefined) => {
  if (w === undefined || !/^\d+$/.test(w.trim())) return null;
  return windowOfSeconds(Number(w));
};

function unitDimension(unit: string | undefined): string {
  if (unit === undefined || unit === "" || unit === "requests") return "requests";
  return dimensionName(unit);
}

export function readIetfRateLimit(r: HeaderReader): void {
  const policyText = r.get("ratelimit-policy");
  const policies = policyText === undefined ? [] : items(policyText);
  const combined = r.get("ratelimit");

  if (combined !== undefined && /(?:^|[\s,])(?:limit|remaining|reset)=/i.test(combined)) {
    // Draft 7: one dictionary for the closest policy.
    const dict = new Map(
      combined.split(",").map((kv) => {
        const eq = kv.indexOf("=");
        return [kv.slice(0, eq).trim().toLowerCase(), kv.slice(eq + 1).trim()] as const;
      }),
    );
    const limitText = dict.get("limit");
    const policy = policies.find((p) => p.token === limitText) ?? policies[0];
    r.add(
      "requests",
      lengthOf(policy?.params.get("w")),
      {
        limit: limitText === undefined ? null : r.countOf("ratelimit", limitText),
        remaining: dict.has("remaining")
          ? r.countOf("ratelimit", dict.get("remaining") ?? "")
          : null,
        resets_at: dict.has("reset") ? r.resetOf("ratelimit", dict.get("reset") ?? "") : null,
      },
      { remaining: "ratelimit" },
    );
  } else if (combined !== undefined) {
    // Structured fields: each item names its policy.
    for (const item of items(combined)) {
      const policy = policies.find((p) => p.token === item.token);
      const q = policy?.params.get("q");
      const rem = item.params.get("r");
      const t = item.params.get("t");
      r.add(
        unitDimension(policy?.params.get("qu")),
        lengthOf(policy?.params.get("w")),
        {
          limit: q === undefined ? null : r.countOf("ratelimit-policy", q),
          remaining: rem === undefined ? null : r.countOf("ratelimit", rem),
          resets_at: t === undefined ? null : r.resetOf("ratelimit", t),
        },
        { remaining: "ratelimit" },
      );
    }
  }

  // Early drafts: three fields, the limit possibly followed by its policies.
  const [first, ...rest] = items(r.get("ratelimit-limit") ?? "");
  if (first !== undefined || r.has("ratelimit-remaining") || r.has("ratelimit-reset")) {
    const limitText = first?.token;
    const w = first?.params.get("w") ?? rest.find((p) => p.token === limitText)?.params.get("w");
    r.add(
      "requests",
      lengthOf(w ?? policies.find((p) => p.token === limitText)?.params.get("w")),
      {
        limit: limitText === undefined ? null : r.countOf("ratelimit-limit", limitText),
        remaining: r.count("ratelimit-remaining"),
        resets_at: r.reset("ratelimit-reset"),
      },
      { remaining: "ratelimit-remaining" },
    );
  }

  // Every policy states its limit, current figures or not (a window already read wins).
  for (const policy of policies) {
    const q = policy.params.get("q") ?? (/^\d/.test(policy.token) ? policy.token : undefined);
    if (q === undefined) continue;
    r.add(unitDimension(policy.params.get("qu")), lengthOf(policy.params.get("w")), {
      limit: r.countOf("ratelimit-policy", q),
      remaining: null,
      resets_at: null,
    });
  }
}
