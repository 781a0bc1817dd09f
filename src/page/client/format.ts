// How figures read on the page: numbers in full with separators, durations in words, times in UTC.

const whole = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const money = new Intl.NumberFormat("en-US", { maximumFractionDigits: 4 });

export const dash = "—";

export function count(n: number | null | undefined): string {
  return n === null || n === undefined ? dash : whole.format(n);
}

export function amount(n: number | null | undefined): string {
  return n === null || n === undefined ? dash : money.format(n);
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

/** "2025-01-31 12:00:05" (UTC). */
export function utc(iso: string): string {
  return iso.replace("T", " ").slice(0, 19);
}

export function perSecond(burn: number | null): string {
  if (burn === null) return dash;
  if (burn >= 1 || burn === 0) return `${money.format(burn)}/s`;
  return `${money.format(burn * 60)}/min`;
}
