import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { HttpError } from "../../src/http/errors.js";
import { decodeContent, decodeTraces } from "../../src/otlp/decode-traces.js";
import { ExportTraceServiceRequest } from "../../src/otlp/otlp-schema.js";
import { otlpExport, otlpJson, otlpProtobuf, otlpSpan } from "../helpers/otlp-spans.js";

// An OTLP/HTTP body → the export (src/otlp/decode-traces.ts): protobuf and the OTLP JSON mapping
// give the same message; what is no export is a 400, never an exception of another kind.

const refusal = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(HttpError);
    return (err as HttpError).status;
  }
  throw new Error("no refusal");
};

describe("decodeTraces", () => {
  it("reads the OTLP JSON mapping (hex ids, int64 strings, enum ints) as protobuf reads the binary", () => {
    const request = otlpExport([
      {
        service: "a",
        spans: [
          otlpSpan({
            kind: 3,
            traceId: "0af7651916cd43dd8448eb211c80319c",
            spanId: "b7ad6b7169203331",
          }),
        ],
      },
    ]);
    const fromJson = decodeTraces(otlpJson(request), "json");
    const fromProto = decodeTraces(otlpProtobuf(request), "protobuf");
    const plain = (m: object) =>
      ExportTraceServiceRequest.toObject(m as never, { longs: String, bytes: String });
    expect(plain(fromJson)).toEqual(plain(fromProto));
    const span = fromProto.resourceSpans?.[0]?.scopeSpans?.[0]?.spans?.[0];
    expect(Buffer.from(span?.traceId as Uint8Array).toString("hex")).toBe(
      "0af7651916cd43dd8448eb211c80319c",
    );
    expect(span?.kind).toBe(3);
  });

  it("refuses truncated protobuf, junk JSON, ids that are not hex, and nesting past protobufjs's limit of 100 with a 400", () => {
    const body = otlpProtobuf(otlpExport([{ service: "a", spans: [otlpSpan({})] }]));
    expect(refusal(() => decodeTraces(body.subarray(0, body.length - 3), "protobuf"))).toBe(400);
    expect(refusal(() => decodeTraces(Buffer.from("[1,2]"), "json"))).toBe(400);
    expect(refusal(() => decodeTraces(Buffer.from('{"resourceSpans":7}'), "json"))).toBe(400);
    const notHex = otlpExport([{ service: "a", spans: [otlpSpan({ traceId: "xyz" })] }]);
    expect(refusal(() => decodeTraces(otlpJson(notHex), "json"))).toBe(400);
    // An attribute value nested 200 arrays deep.
    let value: Record<string, unknown> = { stringValue: "x" };
    for (let i = 0; i < 200; i++) value = { arrayValue: { values: [value] } };
    const deep = otlpExport([
      { service: "a", spans: [{ ...otlpSpan({}), attributes: [{ key: "k", value }] }] },
    ]);
    expect(refusal(() => decodeTraces(otlpJson(deep), "json"))).toBe(400);
  });
});

describe("decodeContent", () => {
  it("unzips gzip within the limit; past it a 413, bad gzip a 400, another coding a 415", async () => {
    const body = Buffer.from("abc".repeat(1000));
    expect(await decodeContent(gzipSync(body), "gzip", 4096)).toEqual(body);
    expect(await decodeContent(body, undefined, 4096)).toBe(body);
    const status = (p: Promise<unknown>) =>
      p.then(
        () => 0,
        (err: HttpError) => err.status,
      );
    expect(await status(decodeContent(gzipSync(body), "gzip", 2999))).toBe(413);
    expect(await status(decodeContent(body, "gzip", 4096))).toBe(400);
    expect(await status(decodeContent(body, "br", 4096))).toBe(415);
  });
});
