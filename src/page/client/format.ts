// How figures read on the page: counts in full with separators, rates and costs to three
// significant digits with their unit, durations in words, times in 24-hour UTC everywhere.

const whole = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export const dash = "—";

/** The unit of credit figures: the provider's own (usually USD), so named neutrally. */
export const CREDITS = "credits";

export function count(n: number | null | undefined): string {
  return n === null || n === undefined ? dash : whole.format(n);
}

/** 28.7861 → "28.8", 0.062512 → "0.0625", 1234.5 → "1,235": enough digits to compare, no more. */
export function figure(n: number): string {
  if (n === 0 || !Number.isFinite(n)) return whole.format(n);
  const digits = Math.max(0, 2 - Math.floor(Math.log10(Math.abs(n))));
  return new Intl.NumberFormat("en-US", { maximumFractionDigits: Math.min(digits, 6) }).format(n);
}

/** A credit figure with its unit: "1.5 credits". */
export function amount(n: number | null | undefined): string {
  return n === null || n === undefined ? dash : `${figure(n)} ${CREDITS}`;
}

export function pct(n: number | null | undefined): string {
  return n === null || n === undefined ? dash : `${Math.round(n * 10) / 10}%`;
}

/** 3725 → "1 h 2 min"; 42 → "42 s". */
export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return dash;
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const hours = Math.floor(m / 60);
  if (hours < 48) return `${hours} h ${m % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

/** "2025-01-31 12:00:05" (UTC, 24-hour). */
export function utc(iso: string): string {
  return new Date(iso).toISOString().replace("T", " ").slice(0, 19);
}

/** "2025-01-31 12:00" (UTC, 24-hour): the form of the range's text and its inputs. */
export function utcMinute(ms: number): string {
  return new Date(ms).toISOString().replace("T", " ").slice(0, 16);
}

/** "2025-01-31 12:00" read as UTC; NaN when it is not that form. */
export function parseUtcMinute(text: string): number {
  const m = /^\s*(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})\s*$/.exec(text);
  if (!m) return Number.NaN;
  const [, y, mo, d, hh, mm] = m.map(Number) as number[];
  const ms = Date.UTC(y ?? 0, (mo ?? 1) - 1, d ?? 1, hh ?? 0, mm ?? 0);
  // 2025-02-31 would roll over into March: refuse it rather than move it.
  return utcMinute(ms) === `${m[1]}-${m[2]}-${m[3]} ${m[4]}:${m[5]}` ? ms : Number.NaN;
}

/** A time axis' tick: "14:30", or the date where a day starts or the span is days long. */
export function axisTick(seconds: number, spanSeconds: number): string {
  const text = utcMinute(seconds * 1000);
  const [date = "", time = ""] = text.split(" ");
  if (spanSeconds > 2 * 86_400)
    return time === "00:00" ? date.slice(5) : `${date.slice(5)} ${time}`;
  return time === "00:00" ? `${date.slice(5)} ${time}` : time;
}

/** A burn rate with its unit: "28.8 requests/s", or per minute or hour when that reads better. */
export function rate(perSecond: number, unit: string): string {
  const a = Math.abs(perSecond);
  if (a === 0 || a >= 1) return `${figure(perSecond)} ${unit}/s`;
  if (a * 60 >= 1) return `${figure(perSecond * 60)} ${unit}/min`;
  return `${figure(perSecond * 3600)} ${unit}/h`;
}
