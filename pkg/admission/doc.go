// Package admission holds handroll's admission webhooks for WebApp v1: a
// mutating Defaulter and a validating Validator, each a review function for
// server.ServeAdmission.
//
// Manager piece replaced: controller-runtime's webhook.CustomDefaulter and
// webhook.CustomValidator (registered with builder.WebhookManagedBy), and the
// admission.Decoder they decode requests with. As controller-runtime does,
// it defaults the object and diffs it with gomodules.xyz/jsonpatch into the
// RFC 6902 patch the API server applies; then it keeps only the operations
// at paths that defaulting changed (defaultingPatch), where
// controller-runtime drops only the removals.
package admission
