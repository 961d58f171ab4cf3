// Package server holds handroll's HTTP servers: metrics, health probes,
// admission and conversion webhooks, and pprof.
//
// Manager pieces replaced: Options.Metrics and metrics.Registry,
// HealthProbeBindAddress with AddHealthzCheck and AddReadyzCheck,
// WebhookServer with its certwatcher, and PprofBindAddress.
package server
