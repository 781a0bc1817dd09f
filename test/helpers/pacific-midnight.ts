// Gemini's daily quota resets at midnight in Los Angeles (docs/providers.md). Tests find that
// midnight apart from the code under test (src/alerts/counted-windows.ts pacificDayStart).

/** The next midnight in Los Angeles after `t`: the first quarter hour its wall clock reads 00:00. */
export function nextPacificMidnight(t: number): number {
  const wall = new Intl.DateTimeFormat("en-GB", {
    timeZone: "America/Los_Angeles",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  });
  let q = Math.floor(t / 900_000) * 900_000 + 900_000;
  while (wall.format(q) !== "00:00") q += 900_000;
  return q;
}
