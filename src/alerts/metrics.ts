import { Counter, Registry } from "prom-client";

// Prometheus metrics of one alerts worker (served by workers/alerts.ts).

export function createAlertsMetrics() {
  const registry = new Registry();
  return {
    registry,
    seriesRefused: new Counter({
      name: "headroom_alerts_series_refused_total",
      help: "Samples of new series not evaluated: their rule or project tracks as many series as allowed",
      registers: [registry],
    }),
  };
}

export type AlertsMetrics = ReturnType<typeof createAlertsMetrics>;
