import { isIP } from "node:net";
import { join } from "node:path";
import { z } from "zod";

// One schema over the environment for every process. Parsed once at start; a bad value stops the
// process with a message that names the variable.

const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce.number().int().min(min).max(max);
/** Node's timers take at most 2^31 - 1 ms: a longer one fires after 1 ms, with a warning. */
export const MAX_TIMER_MS = 2_147_483_647;
/** A duration in ms that feeds a timer. */
const ms = (min: number, max = MAX_TIMER_MS) => int(min, max);
const bool = z.stringbool({
  truthy: ["1", "true", "yes", "on"],
  falsy: ["0", "false", "no", "off"],
});

/** `host:port` or a redis[s]:// URL, comma-separated; at least one. */
const redisNodes = z
  .string()
  .transform((text) =>
    text
      .split(",")
      .map((part) => part.trim())
      .filter(Boolean),
  )
  .pipe(
    z
      .array(
        z.union([
          z.string().regex(/^[A-Za-z0-9.:[\]-]+:\d{1,5}$/, "must be host:port"),
          z.url({ protocol: /^rediss?$/ }),
        ]),
      )
      .min(1),
  );

// proxy-addr's names for address ranges, accepted as Fastify's trustProxy does.
const PROXY_RANGES = new Set(["loopback", "linklocal", "uniquelocal"]);
/** An IP address, or a CIDR. */
const isAddressOrCidr = (entry: string) => {
  const [addr = "", bits, ...rest] = entry.split("/");
  const family = isIP(addr);
  if (family === 0 || rest.length > 0) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
};
const isProxyAddress = (entry: string) => PROXY_RANGES.has(entry) || isAddressOrCidr(entry);
const HOST_NAME =
  /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.?$/i;

/**
 * Which proxies in front of the edge may name the client (X-Forwarded-For): none, a hop count,
 * or their addresses and CIDRs. Never "trust all": the leftmost entry is the client's to forge.
 */
const trustProxy = z.string().transform((text, ctx): false | number | string[] => {
  const value = text.trim().toLowerCase();
  if (["0", "false", "no", "off"].includes(value)) return false;
  if (/^\d+$/.test(value) && Number(value) <= 16) return Number(value);
  const entries = value
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean);
  if (entries.length > 0 && entries.every(isProxyAddress)) return entries;
  ctx.addIssue({
    code: "custom",
    message:
      "must be false, a hop count (1-16: proxies in front of the edge) or the proxies' addresses and CIDRs; trusting every sender would let clients forge their IP",
  });
  return z.NEVER;
});

/** Internal webhook receivers an operator allows: host names, IP addresses and CIDRs. */
const webhookAllowList = z.string().transform((text, ctx) => {
  const entries = text
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean);
  const bad = entries.filter((e) => !isAddressOrCidr(e) && !HOST_NAME.test(e));
  if (bad.length === 0) return entries;
  ctx.addIssue({
    code: "custom",
    message: `must be host names, IP addresses or CIDRs, comma-separated (not ${bad.join(", ")})`,
  });
  return z.NEVER;
});

/** DNS servers: `ip`, `ip:port` or `[ipv6]:port`, comma-separated. */
const dnsServerList = z.string().transform((text, ctx) => {
  const entries = text
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean);
  const hostOf = (e: string) =>
    /^\[(.+)\](?::\d{1,5})?$/.exec(e)?.[1] ?? e.replace(/:\d{1,5}$/, "");
  const bad = entries.filter((e) => isIP(e) === 0 && isIP(hostOf(e)) !== 4 && !e.startsWith("["));
  const badV6 = entries.filter((e) => e.startsWith("[") && isIP(hostOf(e)) !== 6);
  if (bad.length + badV6.length === 0) return entries;
  ctx.addIssue({
    code: "custom",
    message: `must be IP addresses, with a port or not, comma-separated (not ${[...bad, ...badV6].join(", ")})`,
  });
  return z.NEVER;
});

const shardList = z
  .string()
  .transform((text) => text.split(",").map((part) => Number(part.trim())))
  .pipe(z.array(z.number().int().min(0).max(255)).min(1));

/**
 * What one project may hold, set per plan (the control plane refuses past them with 409). The
 * limits a tenant declares join these when they exist (a later issue): one more cap here.
 */
export const planCapsSchema = z.strictObject({
  /** Keys not revoked, of every scope. */
  keys: z.number().int().min(1).max(100_000).optional(),
  /** Alert rules. */
  alert_rules: z.number().int().min(1).max(100_000).optional(),
});
export type PlanCaps = Required<z.infer<typeof planCapsSchema>>;

/** A plan's caps when it sets none (or not all): the same for every plan. */
export const DEFAULT_CAPS: PlanCaps = { keys: 100, alert_rules: 100 };

/** The caps of a plan, each one its own or the default. */
export const capsOf = (plan: Plan | undefined): PlanCaps => ({ ...DEFAULT_CAPS, ...plan?.caps });

export const planSchema = z
  .object({
    /** Reports per calendar month (UTC); null means no monthly quota. */
    monthly: z.number().int().positive().nullable(),
    /** Reports per second, sustained: the token bucket's refill rate. */
    burst: z.number().int().positive(),
    /** Reports at once: the token bucket's size (default: BURST_CAPACITY_FACTOR × burst). */
    capacity: z.number().int().positive().optional(),
    /** What one project may hold (DEFAULT_CAPS for what is not given). */
    caps: planCapsSchema.optional(),
  })
  .refine((p) => p.capacity === undefined || p.capacity >= p.burst, {
    message: "capacity must be at least burst",
    path: ["capacity"],
  });
export type Plan = z.infer<typeof planSchema>;

/** A client's start-up burst (a hint per provider found, up to 15, plus its first calls) passes. */
export const BURST_CAPACITY_FACTOR = 5;

export const DEFAULT_PLANS = {
  free: { monthly: 3_000, burst: 10, capacity: 50 },
  pro: { monthly: 50_000, burst: 200, capacity: 1_000 },
  unlimited: { monthly: null, burst: 2_000, capacity: 10_000 },
} satisfies Record<string, Plan>;

const plansSchema = z
  .string()
  .transform((text, ctx) => {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      ctx.addIssue({ code: "custom", message: "must be JSON" });
      return z.NEVER;
    }
  })
  .pipe(z.record(z.string().regex(/^[a-z0-9_-]{1,32}$/), planSchema))
  .transform((overrides): Record<string, Plan> => ({ ...DEFAULT_PLANS, ...overrides }));

/**
 * The longest REDIS_ACK_TIMEOUT_MS: the edge's Redis commands time out a second later (a WAIT
 * is a command like any other), and a request should not hang longer than that.
 */
export const REDIS_ACK_TIMEOUT_MAX_MS = 4_000;

export const configSchema = z.object({
  HOST: z.string().min(1).default("127.0.0.1"),
  PORT: int(0, 65535).default(3000),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /**
   * The PID of the process that starts this one: once it is no longer this one's parent (gone,
   * even before this one has loaded), stop. The local stack sets it for the processes it starts,
   * so that a stack killed without a word (SIGKILL) leaves none.
   */
  STOP_WITH_PARENT_PID: int(1, 2 ** 31 - 1).optional(),
  /** One log line per request is costly at full rate; errors are always logged. */
  LOG_REQUESTS: bool.default(false),
  /** Proxies that may name the client in X-Forwarded-For: a hop count or addresses/CIDRs. */
  TRUST_PROXY: trustProxy.default(false),

  REDIS_URL: z.url({ protocol: /^rediss?$/ }).default("redis://127.0.0.1:6379"),
  /** Seed nodes of a Redis Cluster (`host:port,…`, or redis[s]:// URLs carrying auth and TLS). */
  REDIS_CLUSTER_NODES: redisNodes.optional(),
  /** Sentinels (`host:port,…`) watching the primary named REDIS_SENTINEL_NAME. */
  REDIS_SENTINELS: redisNodes.optional(),
  REDIS_SENTINEL_NAME: z.string().min(1).optional(),
  /** Password of the sentinels themselves, when they require one. */
  REDIS_SENTINEL_PASSWORD: z.string().min(1).optional(),
  /** A 200 only once this many replicas hold the job (Redis WAIT); 0 trusts the primary alone. */
  REDIS_ACK_REPLICAS: int(0, 16).default(0),
  /** How long the edge waits for those replicas before it answers 503. */
  REDIS_ACK_TIMEOUT_MS: ms(1, REDIS_ACK_TIMEOUT_MAX_MS).default(1_000),
  /** Hash-tagged so that a Redis Cluster keeps the whole queue in one slot. */
  QUEUE_PREFIX: z.string().min(1).default("{headroom}"),
  QUEUE_NAME: z.string().min(1).default("reports"),
  /** Queues the reports are spread over, each in its own Cluster slot (see src/queue/shards.ts). */
  QUEUE_SHARDS: int(1, 256).default(1),
  /** Shards a worker consumes (`0,2`): pins it; unset means every shard, old ones included. */
  WORKER_SHARDS: shardList.optional(),

  BODY_LIMIT_BYTES: int(1024, 16 * 1024 * 1024).default(32 * 1024),
  /** POST /api/reports: the most reports in one batch, and its largest body. */
  BATCH_MAX_REPORTS: int(1, 100_000).default(1_000),
  BATCH_LIMIT_BYTES: int(1024, 64 * 1024 * 1024).default(1024 * 1024),
  /** POST /v1/traces (OTLP): its largest body, as sent and once unzipped. */
  OTLP_LIMIT_BYTES: int(1024, 64 * 1024 * 1024).default(4 * 1024 * 1024),
  /**
   * How long a batch's claim on a client id waits for its job's write before a repeat of the id
   * may settle it (src/edge/report-ids.ts): longer than any Redis command may take.
   */
  REPORT_ID_PENDING_MS: ms(1_000, 10 * 60_000).default(60_000),
  REQUEST_TIMEOUT_MS: ms(100).default(10_000),
  HEADERS_TIMEOUT_MS: ms(100).default(5_000),
  KEEP_ALIVE_TIMEOUT_MS: ms(100).default(72_000),

  /** Reports that arrive while a job is being written share the next one: up to this many. */
  ENQUEUE_MAX_REPORTS: int(1, 10_000).default(500),
  /** How long a report waits for others when no job is being written (0: none; see enqueuer). */
  ENQUEUE_MAX_WAIT_MS: ms(0, 1_000).default(0),
  /** Above this many waiting jobs the edge answers 503 instead of filling Redis. */
  BACKLOG_MAX_JOBS: int(1).default(200_000),
  /** Above this share of Redis `maxmemory` the edge answers 503 (0 disables the check). */
  REDIS_MEMORY_MAX_RATIO: z.coerce.number().min(0).max(1).default(0.9),
  BACKLOG_CHECK_INTERVAL_MS: ms(10).default(250),
  /**
   * Request bodies one project has one edge hold at once (declared sizes, from its key known to
   * the answer): past it the project's next request is a 503 before its body is read.
   */
  EDGE_MAX_BYTES_IN_FLIGHT: int(64 * 1024).default(32 * 1024 * 1024),
  /**
   * Bodies of many reports (batches, OTLP exports) one edge works on at once, from their parse to
   * their answer; past it a request read waits its turn, projects in turn (edge/work-turns.ts).
   */
  EDGE_MAX_BYTES_AT_WORK: int(64 * 1024).default(1024 * 1024),

  /**
   * The key of the account hashes (docs/pools.md): the account a provider names in its answer
   * (OpenAI's organisation and project) is kept only as HMAC-SHA256 under this secret. One per
   * deployment, the same on every edge; changing it splits every pool once. Unset: the account
   * is dropped with the other headers and reports pool by their label only.
   */
  POOL_SECRET: z
    .string()
    .min(32, "must be at least 32 characters (e.g. openssl rand -base64 32)")
    .optional(),

  /** Cache of key lookups on each edge; a revocation is seen within this time. */
  KEY_CACHE_TTL_MS: ms(0, 1_000).default(500),
  AUTH_FAILURES_PER_IP: int(1).default(30),
  AUTH_FAILURE_WINDOW_S: int(1).default(60),
  /** IPs (IPv6 grouped by /64) whose failed authentications an edge tracks at once. */
  AUTH_FAILURE_MAX_CLIENTS: int(1).default(100_000),
  PLANS: plansSchema.default(DEFAULT_PLANS),
  DEFAULT_PLAN: z.string().default("unlimited"),

  /** When set, /metrics needs `Authorization: Bearer <token>`. */
  METRICS_TOKEN: z.string().min(16).optional(),
  /** When set, the edge serves /metrics on this port (on HOST), and not on the public one. */
  METRICS_PORT: int(0, 65535).optional(),

  /** The read API (`npm run api`) listens on this port, on HOST. */
  API_PORT: int(0, 65535).default(3001),
  /**
   * Where the control plane (/api/v1/projects, keys, alert-rules, audit; docs/control-plane.md)
   * is served: off (default), api (beside the read API, on API_PORT), or a port of its own
   * (on HOST) that an operator keeps internal.
   */
  CONTROL_LISTEN: z
    .string()
    .trim()
    .transform((text, ctx): "off" | "api" | number => {
      const value = text.toLowerCase();
      if (value === "off" || value === "api") return value;
      const port = Number(value);
      if (/^\d{1,5}$/.test(value) && port <= 65535) return port;
      ctx.addIssue({ code: "custom", message: 'must be "off", "api" or a port number' });
      return z.NEVER;
    })
    .default("off"),
  /** Days an audit log entry of the control plane is kept. */
  AUDIT_RETENTION_DAYS: int(1, 3_650).default(365),
  /** Entries of one project's audit log kept at most: past it the oldest go (whole log too). */
  AUDIT_MAX_ENTRIES_PER_PROJECT: int(10, 1_000_000).default(1_000),
  /** Control plane writes (POST, PUT, DELETE) per minute per management key ... */
  CONTROL_WRITES_PER_MIN_PER_KEY: int(1, 1_000_000).default(120),
  /** ... and per project, whichever of its manage keys sends them (an admin key's: its own). */
  CONTROL_WRITES_PER_MIN_PER_PROJECT: int(1, 1_000_000).default(120),
  /** Read API requests per second per read key (a token bucket's refill) ... */
  READ_RATE_PER_S: int(1, 100_000).default(20),
  /** ... and the bucket's size: a dashboard opening several panels at once passes. */
  READ_BURST: int(1, 1_000_000).default(100),
  /** A usage query that would return more points is a 400 that says how to narrow it. */
  READ_MAX_POINTS: int(1, 1_000_000).default(10_000),
  /** Identical read queries within this time share one ClickHouse query (0: none). */
  READ_CACHE_TTL_MS: ms(0, 60_000).default(2_000),
  /** ... and past it, the last answer is still served (while a refresh runs) for this long. */
  READ_CACHE_STALE_MS: ms(0, 300_000).default(30_000),
  /** Stale answers refreshed at a time: what polling dashboards take of ClickHouse at most. */
  READ_CACHE_REFRESHES: int(1, 64).default(1),
  /**
   * Identical /api/v1/headroom requests within this time share one answer while the hot copy is
   * unchanged (0: none): how old its `at`, burn rates and exhaustion times can be.
   */
  READ_HEADROOM_TTL_MS: ms(0, 10_000).default(1_000),
  /**
   * A polled /usage over the last 24 h asks ClickHouse for its newest buckets and those whose
   * count of reports moved, and for the whole range this often: how late a rewrite that adds no
   * report (a backfill, rederived windows) reaches its buckets. 0: always the whole range.
   */
  READ_USAGE_FULL_REFRESH_MS: ms(0, 3_600_000).default(600_000),
  /** Distinct read queries the cache keeps at most (least recently used go first). */
  READ_CACHE_MAX_ENTRIES: int(1, 1_000_000).default(5_000),
  /**
   * Bytes each of the read API's four caches (query rows, /usage answers, other answers over a
   * range ending now, /headroom answers) holds at most, counted as what an answer keeps alive: the process's memory for answers.
   */
  READ_CACHE_MAX_BYTES: int(1_048_576).default(64 * 1_048_576),
  /** % of each cache's entries and bytes one project may hold: past it, its own oldest go. */
  READ_CACHE_PROJECT_PCT: int(1, 100).default(25),
  /** A series with no report for this long is `stale` in /api/v1/headroom. */
  READ_STALE_AFTER_S: int(1).default(900),
  /** /api/v1/metrics exports at most this many series (provider, model, app) per project. */
  READ_METRICS_MAX_SERIES: int(1, 1_000_000).default(1_000),
  /** Series (provider × model × app) of one project the hot headroom in Redis keeps at most. */
  READ_HOT_MAX_SERIES_PER_PROJECT: int(1).default(1_000),
  /** A series of the hot headroom not reported on for this long is dropped from it. */
  READ_HOT_SERIES_TTL_S: int(60).default(30 * 86_400),

  CLICKHOUSE_URL: z.url({ protocol: /^https?$/ }).optional(),
  CLICKHOUSE_USER: z.string().default("default"),
  CLICKHOUSE_PASSWORD: z.string().default(""),
  CLICKHOUSE_DATABASE: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
    .default("headroom"),
  /** Default: `clickhouse` under HEADROOM_DATA_DIR (see loadConfig). */
  CLICKHOUSE_PATH: z.string().min(1).default("./.data/clickhouse"),
  CLICKHOUSE_REQUEST_TIMEOUT_MS: ms(1_000).default(60_000),
  /**
   * At most ten years: the TTLs are DateTime sums, which wrap past 2106 (a retention of a century
   * expired every row as it was inserted), and the edge stores older timestamps at their receive
   * time, so an insert spans at most ~120 months of rollup partitions.
   */
  RETENTION_DAYS: int(1, 3_660).default(400),
  /**
   * A cluster of ClickHouse servers (a name in their `remote_servers`): `migrate` creates the
   * schema ON CLUSTER, replicated and sharded, and the workers insert through Distributed tables.
   */
  CLICKHOUSE_CLUSTER: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_-]{0,127}$/, "must be a cluster name (letters, digits, _ and -)")
    .optional(),

  BATCH_MAX_ROWS: int(1, 1_000_000).default(20_000),
  BATCH_MAX_WAIT_MS: ms(1, 60_000).default(1_000),
  /**
   * A batch this old goes as soon as an insert slot is free (batcher.ts): under light load rows
   * go in at once, under heavy load batches grow to BATCH_MAX_WAIT_MS while the inserts are busy.
   * Unset: a quarter of BATCH_MAX_WAIT_MS (loadConfig).
   */
  BATCH_MIN_WAIT_MS: ms(0, 60_000).optional(),
  /**
   * ... but only this long after the worker's previous batch went: each insert costs ClickHouse
   * a fixed ~0.1–0.2 core-s with the views (docs/benchmarks.md), so a steady flow goes in once
   * per this, a lone report after a quiet spell at once. Unset: BATCH_MAX_WAIT_MS.
   */
  BATCH_MIN_INTERVAL_MS: ms(0, 60_000).optional(),
  /** Jobs a worker holds at once; their reports share inserts. */
  WORKER_CONCURRENCY: int(1, 10_000).default(2_048),
  /**
   * ... and the rows of those jobs, at most: past it the worker takes no more until some are
   * stored (a job has up to ENQUEUE_MAX_REPORTS rows, so the jobs alone do not bound memory
   * while ClickHouse is away). At least one job is always held.
   */
  WORKER_MAX_ROWS_IN_HAND: int(1, 10_000_000).default(100_000),
  /** A job whose worker stops renewing its lock for this long is redelivered (stalled). */
  WORKER_LOCK_DURATION_MS: ms(1_000).default(30_000),
  WORKER_STALLED_INTERVAL_MS: ms(1_000).default(30_000),
  /** A worker's /healthz fails once it has held jobs this long without finishing one. */
  WORKER_HEALTH_STALL_MS: ms(1_000).default(120_000),
  WORKER_METRICS_PORT: int(0, 65535).default(9101),
  /** The alerts worker's /metrics and /healthz (on WORKER_METRICS_HOST). */
  ALERTS_METRICS_PORT: int(0, 65535).default(9102),
  WORKER_METRICS_HOST: z.string().min(1).default("127.0.0.1"),
  /**
   * Workers apply pending migrations when they start. Unset: yes on one node, no on a cluster
   * (CLICKHOUSE_CLUSTER), where DDL waits for every host; see `migratesOnStart`.
   */
  MIGRATE_ON_START: bool.optional(),
  RETRY_MAX_DELAY_MS: ms(100).default(30_000),
  /** Days a failed job (the dead-letter set) is kept, with its rows, before it is removed. */
  DLQ_RETENTION_DAYS: int(1, 3_650).default(14),

  /** Ingest workers hand stored rows that alert rules watch to the alerts worker. */
  ALERTS_ENABLED: bool.default(true),
  /** Alert rules are cached per project for this long: a new rule is seen within it. */
  ALERTS_RULES_TTL_MS: ms(0, 600_000).default(5_000),
  /**
   * Jobs the alerts queue may hold; beyond it, ingest workers shed alert rows (counted) rather
   * than fill Redis while the alerts worker is down or behind.
   */
  ALERTS_QUEUE_MAX_JOBS: int(1).default(10_000),
  /** Batches the alerts worker evaluates at once. */
  ALERTS_CONCURRENCY: int(1, 1_000).default(4),
  /** Webhook deliveries in flight per alerts worker. */
  ALERTS_WEBHOOK_CONCURRENCY: int(1, 1_000).default(16),
  /** Attempts per webhook before it goes to the alerts dead-letter set. */
  ALERTS_WEBHOOK_ATTEMPTS: int(1, 100).default(10),
  /** First retry delay of a webhook; doubled at each attempt. */
  ALERTS_WEBHOOK_BACKOFF_MS: ms(10).default(5_000),
  ALERTS_WEBHOOK_TIMEOUT_MS: ms(100).default(10_000),
  /**
   * Deliveries of one project, and of one project's receiver (URL origin), in flight per alerts
   * worker; more wait their turn, so one project's silent receivers cannot take every slot.
   */
  ALERTS_WEBHOOK_PER_PROJECT: int(1, 1_000).default(4),
  ALERTS_WEBHOOK_PER_RECEIVER: int(1, 1_000).default(2),
  /** Unanswered deliveries in a row after which a receiver is not tried for the cool-off. */
  ALERTS_WEBHOOK_BREAKER_FAILURES: int(1, 1_000).default(3),
  ALERTS_WEBHOOK_BREAKER_COOLOFF_MS: ms(100).default(30_000),
  /**
   * Webhook destinations inside the network that rules may use (host names, IPs, CIDRs):
   * loopback, private, link-local and other internal addresses are refused unless listed here.
   */
  ALERTS_WEBHOOK_ALLOW: webhookAllowList.default([]),
  /**
   * DNS servers webhook hosts are looked up on (`ip` or `ip:port`, comma-separated); the system's
   * when unset. Looked up in DNS (c-ares), never on the thread pool the answers' compression uses.
   */
  ALERTS_WEBHOOK_DNS_SERVERS: dnsServerList.default([]),
  /** The longest a webhook host's look-up takes (rule create, update, test, each send). */
  ALERTS_WEBHOOK_DNS_TIMEOUT_MS: ms(100, 30_000).default(2_000),
  /** Webhook look-ups in flight per process; past it a rule change is answered "try again". */
  ALERTS_WEBHOOK_DNS_MAX_CONCURRENT: int(1, 1_000).default(32),
  /** Series (provider × model × app) one alert rule tracks; new ones beyond are not evaluated. */
  ALERTS_MAX_SERIES_PER_RULE: int(1).default(1_000),
  /** Series all alert rules of one project track together. */
  ALERTS_MAX_SERIES_PER_PROJECT: int(1).default(10_000),

  /** The local stack's data (`npm start`): Redis, embedded ClickHouse, stack.json, local key. */
  HEADROOM_DATA_DIR: z.string().min(1).default("./.data"),
  /** Fixed ports for the local stack's own Redis and ClickHouse server; any free port if unset. */
  STACK_REDIS_PORT: int(1, 65535).optional(),
  STACK_CLICKHOUSE_PORT: int(1, 65535).optional(),
  /** The local stack's own Redis `maxmemory` (with noeviction): what the memory gate measures. */
  STACK_REDIS_MAXMEMORY: z
    .string()
    .regex(/^[1-9]\d*(kb|mb|gb)?$/i, "must be a size such as 512mb or 2gb")
    .default("512mb"),
});

export type Config = z.infer<typeof configSchema>;

/** Whether a worker migrates on start: as set, else only without a ClickHouse cluster. */
export function migratesOnStart(
  config: Pick<Config, "MIGRATE_ON_START" | "CLICKHOUSE_CLUSTER">,
): boolean {
  return config.MIGRATE_ON_START ?? !config.CLICKHOUSE_CLUSTER;
}

export class ConfigError extends Error {
  override name = "ConfigError";
}

/**
 * Empty (or blank) strings mean "not set", as in most shells and compose files: a number read
 * from "  " would be 0.
 */
const given = (value: string | undefined): value is string =>
  value !== undefined && value.trim() !== "";

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const input = Object.fromEntries(Object.entries(env).filter(([, v]) => given(v)));
  const parsed = configSchema.safeParse(input);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".") || "(env)"}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join("\n")}`);
  }
  const config = parsed.data;
  // The embedded store lives with the rest of the local data unless it is placed elsewhere.
  if (input.CLICKHOUSE_PATH === undefined) {
    config.CLICKHOUSE_PATH = join(config.HEADROOM_DATA_DIR, "clickhouse");
  }
  // A worker told to gather longer waits longer before an early insert too.
  config.BATCH_MIN_WAIT_MS ??= Math.floor(config.BATCH_MAX_WAIT_MS / 4);
  config.BATCH_MIN_INTERVAL_MS ??= config.BATCH_MAX_WAIT_MS;
  const topologyProblem = redisTopologyProblem(config);
  if (topologyProblem) throw new ConfigError(`invalid configuration:\n  ${topologyProblem}`);
  // The embedded engine is one node: it has no cluster to create the schema on.
  if (config.CLICKHOUSE_CLUSTER && !config.CLICKHOUSE_URL) {
    throw new ConfigError(
      "invalid configuration:\n  CLICKHOUSE_CLUSTER: needs CLICKHOUSE_URL (a server of the cluster)",
    );
  }
  if (!Object.hasOwn(config.PLANS, config.DEFAULT_PLAN)) {
    throw new ConfigError(
      `invalid configuration:\n  DEFAULT_PLAN: unknown plan "${config.DEFAULT_PLAN}"`,
    );
  }
  return config;
}

function redisTopologyProblem(config: Config): string | null {
  if (config.REDIS_CLUSTER_NODES && config.REDIS_SENTINELS) {
    return "REDIS_CLUSTER_NODES, REDIS_SENTINELS: set one topology, not both";
  }
  if (config.REDIS_SENTINELS && !config.REDIS_SENTINEL_NAME) {
    return "REDIS_SENTINEL_NAME: required with REDIS_SENTINELS (the monitored primary's name)";
  }
  if (config.WORKER_SHARDS?.some((s) => s >= config.QUEUE_SHARDS)) {
    return `WORKER_SHARDS: every shard must be below QUEUE_SHARDS (${config.QUEUE_SHARDS})`;
  }
  if (
    (config.QUEUE_SHARDS > 1 || config.REDIS_CLUSTER_NODES) &&
    !/\{[^{}]+\}/.test(config.QUEUE_PREFIX)
  ) {
    return "QUEUE_PREFIX: needs a {hash tag} on a Redis Cluster or with QUEUE_SHARDS > 1";
  }
  return null;
}

/** Whether the environment sets a variable (empty means unset, as for loadConfig). */
export function isSet(env: Record<string, string | undefined>, name: keyof Config): boolean {
  return given(env[name]);
}

/** Names of every variable the schema knows, for docs and for checking compose files. */
export const CONFIG_KEYS = Object.keys(configSchema.shape) as (keyof Config)[];
