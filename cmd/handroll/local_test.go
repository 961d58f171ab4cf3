package main

import (
	"testing"

	"github.com/handroll/handroll/pkg/leader"
)

func TestResolveNamespaces(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "ops-elsewhere")
	for _, tc := range []struct {
		name                 string
		operator, lease      string
		wantOperator, wantLs string
	}{
		{"the pod's namespace for both", "", "", "ops-elsewhere", "ops-elsewhere"},
		{"the flag for both", "mine", "", "mine", "mine"},
		{"the Lease where its own flag says", "mine", "leases", "mine", "leases"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options{operatorNamespace: tc.operator, leader: leader.DefaultOptions()}
			o.leader.LeaseNamespace = tc.lease
			o = resolveNamespaces(o)
			if o.operatorNamespace != tc.wantOperator || o.leader.LeaseNamespace != tc.wantLs {
				t.Errorf("operator %q, Lease %q; want %q, %q", o.operatorNamespace, o.leader.LeaseNamespace, tc.wantOperator, tc.wantLs)
			}
		})
	}
}

// A process outside the cluster serves webhooks only where that writes
// nothing to the cluster (certificates from files) or when told the URL at
// which the API server reaches it.
func TestLocalRunsLeaveTheClusterWebhooksAlone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         options
		inCluster bool
		wantPort  int
	}{
		{"in a pod", options{webhookPort: 9443}, true, 9443},
		{"local, no URL", options{webhookPort: 9443}, false, 0},
		{"local, --webhook-url", options{webhookPort: 9443, webhookURL: "https://10.0.0.5:9443"}, false, 9443},
		{"local, --webhook-cert-dir", options{webhookPort: 9443, webhookCertDir: "/certs"}, false, 9443},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := localWebhooks(tc.o, tc.inCluster).webhookPort; got != tc.wantPort {
				t.Errorf("--webhook-port %d, want %d", got, tc.wantPort)
			}
		})
	}
}
