/** What answered, of several calls that may fail on their own; the first failure if none did. */
export async function answered<T>(promises: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  const values = settled.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  const failed = settled.find((s) => s.status === "rejected");
  if (values.length === 0 && failed) throw failed.reason;
  return values;
}
