package webapp

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/handroll/handroll/test/operator"
)

// TestReadyzFollowsCacheSync runs handroll as a user RBAC does not yet
// allow to list anything: /readyz fails on the informer-sync check, naming
// the informers that have not synced; once a
// ClusterRoleBinding grants the user access, the caches sync and /readyz
// passes, without a restart.
func TestReadyzFollowsCacheSync(t *testing.T) {
	opNS := env.Namespace(t)
	user := "late-operator-" + opNS

	kubeconfig := env.WriteKubeconfig(t, func(cfg *clientcmdapi.Config) {
		for _, auth := range cfg.AuthInfos {
			auth.Impersonate = user
		}
	})

	op := operator.Launch(t, kubeconfig,
		"--operator-namespace="+opNS, "--leader-elect-resource-namespace="+opNS, "--cache-sync-timeout=5m")
	eventually(t, "/readyz reports the informers unsynced", func(context.Context) (bool, error) {
		code, body := op.Readyz(t)
		return code == 500 && strings.Contains(body, "[-]informer-sync failed"), nil
	})
	// It names the informers that have not synced, so that an operator
	// knows what to grant; why (the forbidden error) is in the log.
	if _, body := op.Readyz(t); !operator.Replaced() && !strings.Contains(body, "handroll.dev/v1 WebApps in all namespaces") {
		t.Errorf("/readyz does not name the unsynced WebApp informer:\n%s", body)
	}
	// It stays unready while forbidden.
	time.Sleep(2 * time.Second)
	if code, body := op.Readyz(t); code != 500 {
		t.Fatalf("/readyz passed while the caches cannot sync: %d\n%s", code, body)
	}

	if _, err := kubeClient(t).RbacV1().ClusterRoleBindings().Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	op.WaitReady(t, time.Minute)
	code, body := op.Readyz(t)
	if code != 200 || !strings.Contains(body, "[+]informer-sync ok") {
		t.Errorf("/readyz after the grant: %d\n%s", code, body)
	}
}

// TestReadyzWaitsForEveryInformer runs the operator as a user who may
// list and watch everything it reads except Deployments: /readyz must not
// pass at any moment, however briefly, while that informer cannot sync,
// even once the WebApps' has. A check that waits only for the informers
// that exist when it is asked passes between the WebApps' sync and the
// controllers making the children's informers.
func TestReadyzWaitsForEveryInformer(t *testing.T) {
	opNS := env.Namespace(t)
	user := "no-deployments-" + opNS
	ctx := context.Background()
	kube := kubeClient(t)

	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps", "services", "events"}, Verbs: []string{rbacv1.VerbAll}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{rbacv1.VerbAll}},
			{APIGroups: []string{"handroll.dev"}, Resources: []string{rbacv1.ResourceAll}, Verbs: []string{rbacv1.VerbAll}},
		},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(name, roleName string) {
		t.Helper()
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	t.Cleanup(func() { _ = kube.RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{}) })
	bind(user, user)

	kubeconfig := env.WriteKubeconfig(t, func(cfg *clientcmdapi.Config) {
		for _, auth := range cfg.AuthInfos {
			auth.Impersonate = user
		}
	})
	// Without leader election, as the benchmarks run it: the caches count
	// from the start.
	op := operator.Launch(t, kubeconfig, "--leader-elect=false", "--operator-namespace="+opNS, "--cache-sync-timeout=5m")

	// Probed as often as a start can be timed, for a few seconds.
	failing := 0
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		switch code, body := op.Readyz(t); code {
		case 200:
			t.Fatalf("/readyz passed while Deployments cannot be listed:\n%s", body)
		case 500:
			failing++
		}
	}
	if failing == 0 {
		t.Fatal("/readyz never answered")
	}

	bind(user+"-deployments", "cluster-admin")
	op.WaitReady(t, time.Minute)
}
