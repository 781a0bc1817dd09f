// ClickHouse's exceptions as its HTTP interface reports them: status from the exception's type
// (src/Server/HTTP/exceptionCodeToHTTPStatus.cpp), the code in `X-ClickHouse-Exception-Code`, and
// a `Code: N. DB::Exception: <message>. (TYPE) (version V)` body that @clickhouse/client parses
// into a ClickHouseError with that code and type.

/** The codes this server raises itself; everything else comes from the engine. */
export const CODES = {
  CANNOT_PARSE_TEXT: 6,
  SYNTAX_ERROR: 62,
  UNKNOWN_SETTING: 115,
  READONLY: 164,
  TOO_MANY_SIMULTANEOUS_QUERIES: 202,
  NOT_IMPLEMENTED: 48,
  MEMORY_LIMIT_EXCEEDED: 241,
  CANNOT_DECOMPRESS: 271,
  AUTHENTICATION_FAILED: 516,
  STD_EXCEPTION: 1001,
} as const;
export type OwnErrorType = keyof typeof CODES;

const BAD_REQUEST = new Set([
  "BAD_ARGUMENTS",
  "CANNOT_COMPILE_REGEXP",
  "CANNOT_PARSE_TEXT",
  "CANNOT_PARSE_ESCAPE_SEQUENCE",
  "CANNOT_PARSE_QUOTED_STRING",
  "CANNOT_PARSE_DATE",
  "CANNOT_PARSE_DATETIME",
  "CANNOT_PARSE_NUMBER",
  "CANNOT_PARSE_DOMAIN_VALUE_FROM_STRING",
  "CANNOT_PARSE_IPV4",
  "CANNOT_PARSE_IPV6",
  "CANNOT_PARSE_INPUT_ASSERTION_FAILED",
  "CANNOT_PARSE_UUID",
  "DUPLICATE_COLUMN",
  "ILLEGAL_COLUMN",
  "UNKNOWN_ELEMENT_IN_AST",
  "UNKNOWN_TYPE_OF_AST_NODE",
  "THERE_IS_NO_COLUMN",
  "TOO_DEEP_AST",
  "TOO_BIG_AST",
  "UNEXPECTED_AST_STRUCTURE",
  "SYNTAX_ERROR",
  "INCORRECT_DATA",
  "TYPE_MISMATCH",
  "VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE",
]);
const NOT_FOUND = new Set([
  "UNKNOWN_TABLE",
  "UNKNOWN_FUNCTION",
  "UNKNOWN_IDENTIFIER",
  "UNKNOWN_TYPE",
  "UNKNOWN_STORAGE",
  "UNKNOWN_DATABASE",
  "UNKNOWN_SETTING",
  "UNKNOWN_DIRECTION_OF_SORTING",
  "UNKNOWN_AGGREGATE_FUNCTION",
  "UNKNOWN_FORMAT",
  "UNKNOWN_DATABASE_ENGINE",
  "UNKNOWN_TYPE_OF_QUERY",
  "UNKNOWN_ROLE",
]);
const FORBIDDEN = new Set([
  "UNKNOWN_USER",
  "WRONG_PASSWORD",
  "AUTHENTICATION_FAILED",
  "SET_NON_GRANTED_ROLE",
  "ACCESS_DENIED",
]);
const OTHER: Record<string, number> = {
  REQUIRED_PASSWORD: 401,
  QUERY_IS_TOO_LARGE: 413,
  NOT_IMPLEMENTED: 501,
  SOCKET_TIMEOUT: 503,
  CANNOT_OPEN_FILE: 503,
  CANNOT_SCHEDULE_TASK: 503,
  HTTP_LENGTH_REQUIRED: 411,
  TIMEOUT_EXCEEDED: 408,
  UNSUPPORTED_MEDIA_TYPE: 415,
};

export function httpStatusFor(type: string): number {
  if (BAD_REQUEST.has(type)) return 400;
  if (NOT_FOUND.has(type)) return 404;
  if (FORBIDDEN.has(type)) return 403;
  return OTHER[type] ?? 500;
}

export interface ClickHouseException {
  code: number;
  type: string;
  /** Without the `Code:` prefix and the `(TYPE) (version)` suffix. */
  message: string;
}

/** An exception this server raises itself (auth, protocol, fault injection). */
export class HttpQueryError extends Error implements ClickHouseException {
  readonly code: number;
  constructor(
    readonly type: OwnErrorType,
    message: string,
  ) {
    super(message);
    this.code = CODES[type];
  }
}

const VERSION_SUFFIX = /\s*\(version [^()]*(?:\([^()]*\))?[^()]*\)\.?\s*$/;
const TYPE_SUFFIX = /\s*\(([A-Z][A-Z0-9_]*)\)\.?\s*$/;
const CODE_PREFIX = /^\s*Code: (\d+)\. DB::Exception: /;

/**
 * The engine's error as one ClickHouse exception. chdb sometimes nests the same exception
 * ("Code: 73. DB::Exception: Code: 73. DB::Exception: ... (UNKNOWN_FORMAT) (version …). (…)");
 * a server reports it once, so the repeated prefixes and suffixes are peeled off.
 */
export function toClickHouseException(err: unknown): ClickHouseException {
  if (err instanceof HttpQueryError)
    return { code: err.code, type: err.type, message: err.message };
  const raw = err instanceof Error ? err.message : String(err);
  const engineCode =
    typeof (err as { clickhouseCode?: unknown })?.clickhouseCode === "number"
      ? (err as { clickhouseCode: number }).clickhouseCode
      : undefined;
  let text = raw.trim();
  let type: string | undefined;
  let code = engineCode;
  const peelSuffix = () => {
    text = text.replace(VERSION_SUFFIX, "");
    const t = TYPE_SUFFIX.exec(text);
    if (t) {
      type ??= t[1];
      text = text.slice(0, t.index);
    }
  };
  peelSuffix();
  for (let p = CODE_PREFIX.exec(text); p; p = CODE_PREFIX.exec(text)) {
    code ??= Number(p[1]);
    text = text.slice(p[0].length);
    peelSuffix();
  }
  if (code === undefined || type === undefined) {
    // Not an engine exception (e.g. the session was closed under us): ClickHouse reports foreign
    // exceptions as STD_EXCEPTION.
    return { code: code ?? CODES.STD_EXCEPTION, type: type ?? "STD_EXCEPTION", message: text };
  }
  return { code, type, message: text };
}

/** The response body exactly as clickhouse-server writes it. */
export function exceptionBody(e: ClickHouseException, version: string): string {
  const message = e.message.endsWith(".") ? e.message : `${e.message}.`;
  return `Code: ${e.code}. DB::Exception: ${message} (${e.type}) (version ${version})\n`;
}
