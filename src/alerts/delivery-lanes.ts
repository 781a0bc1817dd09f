// Webhook deliveries in flight in one alerts worker, counted per project and per receiver (a
// project's destination origin). A delivery over either cap is not given a slot: the caller
// defers it, so one project's slow or silent receivers hold a few slots, never all of them.

export interface LaneCaps {
  perProject: number;
  perReceiver: number;
}

/** Where a delivery goes: the project's own lane for the URL's origin (a query may hold a token). */
export function receiverOf(project: string, url: string): string {
  const origin = URL.canParse(url) ? new URL(url).origin : url;
  return `${project} ${origin}`;
}

export interface DeliveryLanes {
  /**
   * Takes a place in the project's and the receiver's lanes: returns its release, or null when
   * either lane is full (nothing is taken then).
   */
  enter(project: string, receiver: string): (() => void) | null;
  /** Lanes with deliveries in flight (empty lanes are forgotten). */
  size: () => number;
}

export function createDeliveryLanes(caps: LaneCaps): DeliveryLanes {
  const inFlight = new Map<string, number>();
  const held = (lane: string) => inFlight.get(lane) ?? 0;
  const add = (lane: string, n: number) => {
    const next = held(lane) + n;
    if (next > 0) inFlight.set(lane, next);
    else inFlight.delete(lane);
  };

  return {
    enter(project: string, receiver: string): (() => void) | null {
      const projectLane = `project ${project}`;
      const receiverLane = `receiver ${receiver}`;
      if (held(projectLane) >= caps.perProject || held(receiverLane) >= caps.perReceiver) {
        return null;
      }
      const lanes = [projectLane, receiverLane];
      for (const lane of lanes) add(lane, 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        for (const lane of lanes) add(lane, -1);
      };
    },
    size: () => inFlight.size,
  };
}
