/** Redis did not acknowledge the job holding the report: it is not durably queued. */
export class EnqueueError extends Error {
  override name = "EnqueueError";
}
