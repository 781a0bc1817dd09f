// At most `slots` ClickHouse inserts at once, the others waiting in the order they asked. Batches
// are claimed (their manifests written to Redis) and their jobs settled outside a slot, so the
// next batch is ready to go the moment an insert is acknowledged.

export function createInsertSlots(slots: number) {
  let free = slots;
  const waiting: (() => void)[] = [];
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else free += 1;
  };
  return async function inSlot<T>(fn: () => Promise<T>): Promise<T> {
    if (free > 0) free -= 1;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await fn();
    } finally {
      release();
    }
  };
}
