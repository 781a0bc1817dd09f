import { setFlagsFromString } from "node:v8";

// V8 settings of the edge process, set before any other module is loaded (edge.ts imports this
// first). Allocation-site pretenuring allocates objects straight into the old generation once
// most objects of their allocation site outlive a scavenge. At saturation every request's
// objects do -- hundreds of requests wait for their job's acknowledgement -- so they were
// pretenured, died in the old generation and piled up there until a full mark-compact: more GC
// and a larger heap. Without it they die young, in the scavenger.
setFlagsFromString("--no-allocation-site-pretenuring");
