/** Redis did not acknowledge the job holding the report: it is not durably queued. */
export class EnqueueError extends Error {
  override name = "EnqueueError";
  /**
   * The job may be in Redis all the same, and then a worker stores it: Redis took the write but
   * its replicas did not confirm it, or the write went out and no answer came back.
   */
  readonly mayBeStored: boolean;

  constructor(message: string, options: { cause?: unknown; mayBeStored?: boolean } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.mayBeStored = options.mayBeStored ?? false;
  }
}
