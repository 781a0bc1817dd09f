import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";

// OpenTelemetry's own definitions of an OTLP trace export (opentelemetry-proto v1.11.0, vendored
// under ./proto with their licence), loaded with protobufjs once per process. The .proto files
// travel beside this module: `npm run build` copies them to dist/src/otlp/proto
// (bin/copy-protos.mjs), and the image takes dist whole.

const PROTO_DIR = fileURLToPath(new URL("./proto/", import.meta.url));
const SERVICE = "opentelemetry/proto/collector/trace/v1/trace_service.proto";

function load(): protobuf.Root {
  const root = new protobuf.Root();
  // Imports name paths from the proto root ("opentelemetry/proto/common/v1/common.proto").
  root.resolvePath = (_origin, target) => PROTO_DIR + target;
  root.loadSync(SERVICE, { keepCase: false });
  // google.rpc.Status, which OTLP/HTTP answers errors with: only its code and message (fields 1
  // and 2 of googleapis' google/rpc/status.proto); `details` is never sent.
  root.add(
    new protobuf.Namespace("google").add(
      new protobuf.Namespace("rpc").add(
        new protobuf.Type("Status")
          .add(new protobuf.Field("code", 1, "int32"))
          .add(new protobuf.Field("message", 2, "string")),
      ),
    ),
  );
  root.resolveAll();
  return root;
}

const root = load();

export const ExportTraceServiceRequest = root.lookupType(
  "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest",
);
export const ExportTraceServiceResponse = root.lookupType(
  "opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse",
);
export const RpcStatus = root.lookupType("google.rpc.Status");

// The decoded shapes this service reads (protobufjs messages; fields camelCase). Only what the
// span mapping uses is declared.

export interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | protobuf.Long | string;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
  kvlistValue?: { values?: KeyValue[] };
  bytesValue?: Uint8Array;
}

export interface KeyValue {
  key?: string;
  value?: AnyValue;
}

export interface SpanEvent {
  name?: string;
  attributes?: KeyValue[];
}

export interface Span {
  traceId?: Uint8Array;
  spanId?: Uint8Array;
  parentSpanId?: Uint8Array;
  name?: string;
  kind?: number;
  startTimeUnixNano?: number | protobuf.Long | string;
  endTimeUnixNano?: number | protobuf.Long | string;
  attributes?: KeyValue[];
  events?: SpanEvent[];
}

export interface ResourceSpans {
  resource?: { attributes?: KeyValue[] };
  scopeSpans?: { spans?: Span[] }[];
}

export interface TraceRequest {
  resourceSpans?: ResourceSpans[];
}

/** SpanKind (trace.proto): the kinds an HTTP call to a provider is recorded as. */
export const SPAN_KIND_CLIENT = 3;
