// Whether a failed insert is the data's fault (retrying the same rows can never succeed: split
// the batch and dead-letter the bad rows) or the service's (wait and retry the same insert).
// Decided on ClickHouse's numeric error code, never on message text. A refusal must be
// deterministic (the same rows always refused), because a split batch's halves get tokens of
// their own: ATTEMPT_TO_READ_AFTER_EOF (32), which a body cut off in transit can cause too, is
// transient. Anything not known to be about the data is transient: a wrong guess then delays
// reports, never drops them.

const DATA_ERROR_CODES = new Set([
  6, // CANNOT_PARSE_TEXT
  26, // CANNOT_PARSE_QUOTED_STRING
  27, // CANNOT_PARSE_INPUT_ASSERTION_FAILED
  38, // CANNOT_PARSE_DATE
  41, // CANNOT_PARSE_DATETIME
  53, // TYPE_MISMATCH
  69, // ARGUMENT_OUT_OF_BOUND
  70, // CANNOT_CONVERT_TYPE
  72, // CANNOT_PARSE_NUMBER
  117, // INCORRECT_DATA
  131, // TOO_LARGE_STRING_SIZE
  321, // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
  349, // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
  376, // CANNOT_PARSE_UUID
  407, // DECIMAL_OVERFLOW
  691, // UNKNOWN_ELEMENT_OF_ENUM
]);

export interface ClickHouseErrorShape {
  message: string;
  code: string;
  type?: string;
}

/**
 * A ClickHouse server error, recognised by its shape: the in-process engine (chdb) throws
 * @clickhouse/client-common's ClickHouseError, a different class from the one @clickhouse/client
 * exports, with the same fields.
 */
export function isClickHouseError(err: unknown): err is ClickHouseErrorShape {
  const e = err as Partial<ClickHouseErrorShape> | null;
  return err instanceof Error && typeof e?.code === "string" && /^\d+$/.test(e.code);
}

export type InsertFailure = "data" | "transient";

export function classifyInsertError(err: unknown): InsertFailure {
  if (isClickHouseError(err) && DATA_ERROR_CODES.has(Number(err.code))) return "data";
  return "transient";
}

export function describeError(err: unknown): string {
  if (isClickHouseError(err))
    return `ClickHouse ${err.code} ${err.type ?? ""}: ${err.message}`.slice(0, 2_000);
  return err instanceof Error ? err.message : String(err);
}
