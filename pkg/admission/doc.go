// Package admission holds handroll's admission webhooks for WebApp v1: a
// mutating Defaulter and a validating Validator, each a review function for
// server.ServeAdmission.
//
// Manager piece replaced: controller-runtime's webhook.CustomDefaulter and
// webhook.CustomValidator (registered with builder.WebhookManagedBy), and the
// admission.Decoder they decode requests with. Where controller-runtime
// defaults the object and then diffs it with gomodules.xyz/jsonpatch, this
// package carries a small JSON diff (jsonpatch.go) that writes the RFC 6902
// patch the API server applies.
package admission
