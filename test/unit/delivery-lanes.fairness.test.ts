import { describe, expect, it } from "vitest";
import { createDeliveryLanes, receiverOf } from "../../src/alerts/delivery-lanes.js";
import { createReceiverBreakers } from "../../src/alerts/receiver-breaker.js";

// The alerts worker's fairness between projects: lanes cap what one project and one of its
// receivers hold in flight; a breaker stops trying a receiver that keeps not answering.

describe("delivery lanes", () => {
  it("cap a project and a receiver, and free their places on release (once)", () => {
    const lanes = createDeliveryLanes({ perProject: 3, perReceiver: 2 });
    const a1 = receiverOf("a", "https://hooks.a.example/x?token=1");
    const a2 = receiverOf("a", "https://other.a.example/y");
    const first = lanes.enter("a", a1);
    expect(first).not.toBeNull();
    expect(lanes.enter("a", a1)).not.toBeNull();
    expect(lanes.enter("a", a1)).toBeNull(); // the receiver's cap
    expect(lanes.enter("a", a2)).not.toBeNull();
    expect(lanes.enter("a", a2)).toBeNull(); // the project's cap
    // Another project, even to the same origin, has lanes of its own.
    expect(lanes.enter("b", receiverOf("b", "https://hooks.a.example/x"))).not.toBeNull();
    first?.();
    first?.();
    expect(lanes.enter("a", a1)).not.toBeNull();
    expect(lanes.enter("a", a2)).toBeNull();
  });

  it("a receiver is its project and its URL's origin, never its path or query", () => {
    expect(receiverOf("p", "https://h.example:8443/a?token=secret")).toBe(
      "p https://h.example:8443",
    );
  });
});

describe("receiver breaker", () => {
  it("opens after the failures in a row, lets one probe through after the cool-off, closes on an answer", () => {
    let now = 1_000;
    const b = createReceiverBreakers({ failures: 2, coolOffMs: 500, now: () => now });
    b.record("r", false);
    expect(b.allow("r")).toBe(true);
    b.record("r", false);
    expect(b.allow("r")).toBe(false);
    expect(b.openUntil("r")).toBe(1_500);
    now = 1_499;
    expect(b.allow("r")).toBe(false);
    now = 1_500;
    expect(b.allow("r")).toBe(true); // the probe
    expect(b.allow("r")).toBe(false); // the others wait for its outcome
    b.record("r", false);
    expect(b.openUntil("r")).toBe(2_000);
    now = 2_000;
    expect(b.allow("r")).toBe(true);
    b.record("r", true); // any answer, even an error status
    expect(b.allow("r")).toBe(true);
    expect(b.openUntil("r")).toBeNull();
  });

  it("an answer in between starts the count again; receivers are apart", () => {
    const b = createReceiverBreakers({ failures: 2, coolOffMs: 500, now: () => 0 });
    b.record("r", false);
    b.record("r", true);
    b.record("r", false);
    expect(b.allow("r")).toBe(true);
    b.record("s", false);
    b.record("s", false);
    expect(b.allow("s")).toBe(false);
    expect(b.allow("r")).toBe(true);
  });
});
