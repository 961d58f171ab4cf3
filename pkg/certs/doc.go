// Package certs gives handroll's webhooks a serving certificate it makes and
// rotates itself, for clusters without cert-manager.
//
// Manager piece replaced: next to a controller-runtime Manager, the webhook
// certificate usually comes from cert-manager (a Certificate mounted into
// the pod for the certwatcher, and its cainjector writing the CA bundle into
// the webhook configurations and the CRD), or from open-policy-agent's
// cert-controller (rotator.AddRotator), which does both in process. Manager
// is the second kind, written out.
//
// # State
//
// One kubernetes.io/tls Secret in the operator's namespace, shared by every
// replica:
//
//	tls.crt, tls.key  the serving certificate (ECDSA P-256) and its key
//	ca.crt            every CA the API server must trust, newest first
//	ca.key            the key of the newest CA, which signs from now on
//	annotation handroll.dev/ca-published-at: when that CA entered ca.crt
//
// With Options.CAConfigMap, the bundle alone (never ca.key) is also kept in
// a ConfigMap's ca.crt, for clients that may not read the Secret, such as a
// Prometheus verifying the metrics server (publish.go).
//
// Decisions depend only on the Secret's content and the clock (policy.decide),
// so replicas agree on what to write; every write is an Update with the
// resourceVersion read, and the replica that loses the race reads the winner's
// Secret and, finding it current, writes nothing.
//
// # Rotation
//
// The serving certificate is renewed when two thirds of its lifetime have
// passed, when it lacks a name the options ask for, or when it is not signed
// by the newest CA. A CA lives four serving lifetimes and is replaced after
// two thirds of its life, without a failed handshake:
//
//  1. a new CA is added to ca.crt beside the old one, and becomes ca.key;
//     the serving certificate, signed by the old CA, stays;
//  2. every replica injects the two-CA bundle into the webhook
//     configurations, the CRD and the CA ConfigMap;
//  3. once the new CA has been published, and this replica has seen the
//     bundle in every target, for PropagationDelay (the API servers pick up
//     the changed objects), the serving certificate is signed by the new CA;
//  4. the old CA leaves ca.crt when it expires. Every certificate it signed
//     expired before it: none outlives its CA.
//
// # Serving
//
// Each replica watches the Secret by name with a single-object informer and
// keeps the certificate in memory; GetCertificate (a
// server.CertificateSource) never waits on the network, and a rotation by
// any replica is served by all within a moment of the watch event.
//
// With Options.MetricsServiceName, each replica also issues a certificate
// for that Service in memory (GetMetricsCertificate), with ca.key, and
// moves it to a new CA once the serving certificate has and the CA has been
// published for a few minutes, the time a Prometheus takes to trust it.
//
// # Permissions
//
// In the operator's namespace, secrets get, list, watch (the one name), create
// and update, and with a CA ConfigMap configmaps create, get and update (the
// one name); cluster-wide, get and update on the named
// mutatingwebhookconfigurations, validatingwebhookconfigurations and
// customresourcedefinitions.
package certs
