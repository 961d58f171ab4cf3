package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/handroll/handroll/test/budget"
)

// The real node: one kubelet with containerd and runc, running real
// containers beside kwok's fake nodes. Its network is a bridge of this
// machine that no packet leaves: the egress guard (iptables) is installed
// before the first component starts and removed last.
const (
	// RealNodeName is the real node's name.
	RealNodeName = "real-0"
	// RealNodeTaint keeps every pod off the real node but those that
	// tolerate it (the effect is NoSchedule, the value "true").
	RealNodeTaint = "handroll.dev/real-node"
	// RealNodeLabel is set to "true" on the real node, for nodeSelectors.
	RealNodeLabel = "handroll.dev/real-node"

	// RuntimeDir holds the node runtime's state and socket. It is fixed (one
	// real node per machine: runc and the bridge are machine-wide) and short
	// (a unix socket path must fit in 108 bytes).
	RuntimeDir = "/run/handroll-node"
	// ContainerdAddress is the node runtime's socket, for `ctr --address`.
	ContainerdAddress = RuntimeDir + "/containerd.sock"

	// PauseImage is the sandbox image the runtime is configured with; it
	// must be imported before the first pod (Options.RealNode.PauseArchive).
	PauseImage = "localhost/handroll-pause:1"

	// The pod network: one bridge, one subnet, and the bridge's own address,
	// which is also the node's and the API server's address.
	Bridge      = "hr0"
	PodSubnet   = "10.244.0.0/24"
	NodeIP      = "10.244.0.1"
	clusterCIDR = "10.244.0.0/16"
	// ServiceCIDR is kube-apiserver's --service-cluster-ip-range.
	ServiceCIDR = "10.96.0.0/16"

	// The guard's chains: one on FORWARD (pods' traffic), one on OUTPUT
	// (the host's own traffic to Service addresses).
	GuardChain     = "HANDROLL-EGRESS"
	GuardHostChain = "HANDROLL-EGRESS-HOST"

	cniBinDir = "/usr/lib/cni"
)

// RealNodeOptions ask Start for a real node.
type RealNodeOptions struct {
	// PauseArchive is an OCI archive of PauseImage.
	PauseArchive string
	// Registry, when set, is the binary of hack/image/cmd/registry: the
	// node then runs a registry on loopback and its containerd pulls every
	// image named localhost/... from it, as a cluster pulls from its
	// registry (NodeState.Registry is where to push).
	Registry string
}

// RegistryAddrFile holds the local registry's address while it runs. It is
// under RuntimeDir, so NodeLeftovers sees it, and it marks the registry's
// command line (--addr-file=...) for nodeProcesses.
const RegistryAddrFile = RuntimeDir + "/registry.addr"

// NodeState is what Stop needs to undo the real node, saved with the
// control plane so that `cluster down` from another process can do it.
type NodeState struct {
	Dir       string `json:"dir"`
	KubeProxy string `json:"kubeProxy"` // the binary, for --cleanup
	// Registry is the local registry's host:port on loopback, empty when
	// the node runs none. Images pushed there as ADDR/NAME:TAG are pulled
	// by the node as localhost/NAME:TAG.
	Registry string `json:"registry,omitempty"`
	// Sysctls holds the values this node changed, to put back.
	Sysctls map[string]string `json:"sysctls"`
}

// RealNodeMissing says what this machine lacks for a real node, or nothing
// when it has it all: root, the runtime, runc, the CNI plugins and
// iptables (hack/install-node-packages.sh installs them).
func RealNodeMissing() []string {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (the kubelet, the runtime and the network need it)")
	}
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip6tables", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			missing = append(missing, "the CNI plugin "+filepath.Join(cniBinDir, plugin))
		}
	}
	return missing
}

// claimNode makes sure no other real node runs on this machine, and
// removes what a dead one left. It runs before cp.Node is set, so that a
// failure here never has Stop undo another node's network.
func (cp *ControlPlane) claimNode() error {
	left := NodeLeftovers("")
	if len(left) == 0 {
		return nil
	}
	// A runtime that answers is a real node in use; without one, these are
	// the remains of a node whose processes were killed without a stop.
	if exec.Command("ctr", "--address", ContainerdAddress, "version").Run() == nil {
		return fmt.Errorf("another real node runs on this machine (its runtime answers at %s); bring it down first (make cluster-down)", ContainerdAddress)
	}
	cp.logf("removing what an earlier real node left: %s", strings.Join(left, "; "))
	stale := &ControlPlane{Node: &NodeState{}}
	return stale.cleanUpNode()
}

// setUpNodeNetwork makes the bridge and installs the egress guard. It runs
// before any component starts, so no pod ever runs without the guard.
func (cp *ControlPlane) setUpNodeNetwork() error {
	steps := [][]string{
		{"ip", "link", "add", Bridge, "type", "bridge"},
		{"ip", "addr", "add", NodeIP + "/24", "dev", Bridge},
		{"ip", "link", "set", Bridge, "up"},
	}
	steps = append(steps, guardRules()...)
	steps = append(steps,
		// Pods have no IPv6 address of their own, but the bridge carries
		// link-local IPv6: none of it is forwarded off the bridge either.
		[]string{"ip6tables", "-w", "-N", GuardChain},
		[]string{"ip6tables", "-w", "-A", GuardChain, "-i", Bridge, "-o", Bridge, "-j", "RETURN"},
		[]string{"ip6tables", "-w", "-A", GuardChain, "-i", Bridge, "-m", "comment", "--comment", GuardLeaving, "-j", "DROP"},
		[]string{"ip6tables", "-w", "-A", GuardChain, "-o", Bridge, "-m", "comment", "--comment", GuardEntering, "-j", "DROP"},
		[]string{"ip6tables", "-w", "-I", "FORWARD", "1", "-j", GuardChain},
		// Inserted first, so nothing earlier on FORWARD or OUTPUT accepts a
		// packet the guard would drop.
		[]string{"iptables", "-w", "-I", "FORWARD", "1", "-j", GuardChain},
		[]string{"iptables", "-w", "-I", "OUTPUT", "1", "-j", GuardHostChain},
		// A Service address the host sends to goes to the bridge, never to
		// the default route; kube-proxy's rules then translate it.
		[]string{"ip", "route", "add", ServiceCIDR, "dev", Bridge},
	)
	for _, s := range steps {
		if err := run(s...); err != nil {
			return err
		}
	}
	// Only with the guard in place: pods reach Services on this bridge
	// (routed back out of it after kube-proxy's translation).
	for key, want := range map[string]string{
		"net/ipv4/ip_forward":                 "1",
		"net/bridge/bridge-nf-call-iptables":  "1",
		"net/bridge/bridge-nf-call-ip6tables": "1",
	} {
		if err := cp.setSysctl(key, want); err != nil {
			return err
		}
	}
	return nil
}

// guardRules are the guard's chains and rules; every drop has a comment,
// which is how GuardCounters names it.
func guardRules() [][]string {
	const op = "-A"
	ipt := func(chain, comment string, match ...string) []string {
		r := append([]string{"iptables", "-w", op, chain}, match...)
		return append(r, "-m", "comment", "--comment", comment, "-j", "DROP")
	}
	return [][]string{
		{"iptables", "-w", "-N", GuardChain},
		{"iptables", "-w", "-N", GuardHostChain},
		// Pod to pod, bridged or routed back into the bridge: allowed (and
		// left to the rest of FORWARD, kube-proxy's rules among them).
		{"iptables", "-w", op, GuardChain, "-i", Bridge, "-o", Bridge, "-j", "RETURN"},
		ipt(GuardChain, GuardLeaving, "-i", Bridge),
		ipt(GuardChain, GuardEntering, "-o", Bridge),
		ipt(GuardChain, GuardPodSource, "-s", clusterCIDR),
		ipt(GuardChain, GuardService, "-d", ServiceCIDR),
		// The host's own packets to a Service address that no rule of
		// kube-proxy translated (nat OUTPUT runs before this).
		ipt(GuardHostChain, GuardService, "-d", ServiceCIDR),
	}
}

// The comments of the guard's drop rules.
const (
	GuardLeaving   = "handroll: pod network leaving the machine"
	GuardEntering  = "handroll: forwarded into the pod network"
	GuardPodSource = "handroll: pod address off the bridge"
	GuardService   = "handroll: untranslated Service address"
)

// GuardCounters reads the packets each drop rule of the guard has dropped,
// keyed by chain and comment ("HANDROLL-EGRESS/handroll: ...").
func GuardCounters() (map[string]int64, error) {
	counts := map[string]int64{}
	for _, chain := range []string{GuardChain, GuardHostChain} {
		out, err := exec.Command("iptables", "-w", "-L", chain, "-n", "-v", "-x").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("iptables -L %s: %w: %s", chain, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			start := strings.Index(line, "/* ")
			end := strings.Index(line, " */")
			if len(f) < 3 || f[2] != "DROP" || start < 0 || end < start {
				continue
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				continue
			}
			counts[chain+"/"+line[start+3:end]] += n
		}
	}
	return counts, nil
}

func (cp *ControlPlane) setSysctl(key, value string) error {
	path := filepath.Join("/proc/sys", key)
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	if _, saved := cp.Node.Sysctls[key]; !saved {
		cp.Node.Sysctls[key] = strings.TrimSpace(string(old))
	}
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("setting %s=%s: %w", key, value, err)
	}
	return nil
}

// startRealNode starts kube-proxy, containerd and the kubelet (in that
// order: Services route before the first pod), imports the pause image and
// waits until the node is Ready.
func (cp *ControlPlane) startRealNode(ctx context.Context, bins *binaries, opts RealNodeOptions, tokens nodeTokens, caCert string) error {
	kubelet, kubeProxy, err := bins.nodeBinaries()
	if err != nil {
		return err
	}
	cp.Node.KubeProxy = kubeProxy
	dir := cp.Node.Dir
	for _, sub := range []string{"containerd", "kubelet", "cni", "cni-ipam", "pod-logs", "certs.d"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(RuntimeDir, 0o711); err != nil {
		return err
	}
	if err := cp.startKubeProxy(ctx, kubeProxy, tokens.proxy); err != nil {
		return err
	}
	// The registry, before containerd, whose hosts configuration names it.
	if opts.Registry != "" {
		if err := cp.startRegistry(ctx, opts.Registry); err != nil {
			return err
		}
	}
	if err := cp.startContainerd(ctx, opts); err != nil {
		return err
	}
	if err := cp.startKubelet(ctx, kubelet, tokens.kubelet, caCert); err != nil {
		return err
	}
	return cp.waitNodeReady(ctx, budget.Scale(2*time.Minute))
}

// startKubeProxy starts kube-proxy, as the system:kube-proxy user the
// bootstrap RBAC binds.
func (cp *ControlPlane) startKubeProxy(ctx context.Context, kubeProxy, token string) error {
	dir := cp.Node.Dir
	proxyKubeconfig := filepath.Join(dir, "kube-proxy.kubeconfig")
	if err := writeKubeconfig(proxyKubeconfig, cp.Server, cp.Config.CAData, token); err != nil {
		return err
	}
	proxyConfig := filepath.Join(dir, "kube-proxy.yaml")
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	if err := os.WriteFile(proxyConfig, []byte(fmt.Sprintf(kubeProxyConfig,
		proxyKubeconfig, RealNodeName, clusterCIDR, ports[0], ports[1], NodeIP)), 0o600); err != nil {
		return err
	}
	return cp.start(ctx, "kube-proxy", kubeProxy, []string{"--config=" + proxyConfig}, true, nil)
}

// startContainerd starts containerd on paths of its own, then imports the
// pause image when opts names its archive.
func (cp *ControlPlane) startContainerd(ctx context.Context, opts RealNodeOptions) error {
	dir := cp.Node.Dir
	cniConf := filepath.Join(dir, "cni", "10-handroll.conflist")
	if err := os.WriteFile(cniConf, []byte(fmt.Sprintf(cniConfig, Bridge, PodSubnet, NodeIP, filepath.Join(dir, "cni-ipam"))), 0o600); err != nil {
		return err
	}
	ctdConfig := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(ctdConfig, []byte(fmt.Sprintf(containerdConfig,
		filepath.Join(dir, "containerd"), RuntimeDir+"/state", ContainerdAddress, PauseImage,
		RuntimeDir+"/runc", cniBinDir, filepath.Join(dir, "cni"), filepath.Join(dir, "certs.d"))), 0o600); err != nil {
		return err
	}
	containerd, err := exec.LookPath("containerd")
	if err != nil {
		return err
	}
	if err := cp.start(ctx, "containerd", containerd, []string{"--config=" + ctdConfig}, true, func(ctx context.Context) error {
		return exec.CommandContext(ctx, "ctr", "--address", ContainerdAddress, "version").Run()
	}); err != nil {
		return err
	}
	if opts.PauseArchive != "" {
		return ImportImage(ctx, opts.PauseArchive)
	}
	return nil
}

// startKubelet starts the kubelet, as system:node:real-0 (the Node
// authorizer's identity).
func (cp *ControlPlane) startKubelet(ctx context.Context, kubelet, token, caCert string) error {
	dir := cp.Node.Dir
	kubeletKubeconfig := filepath.Join(dir, "kubelet.kubeconfig")
	if err := writeKubeconfig(kubeletKubeconfig, cp.Server, cp.Config.CAData, token); err != nil {
		return err
	}
	kubeletConfig := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(kubeletConfig, []byte(fmt.Sprintf(kubeletConfigYAML,
		NodeIP, caCert, "unix://"+ContainerdAddress, filepath.Join(dir, "pod-logs"), RealNodeTaint)), 0o600); err != nil {
		return err
	}
	return cp.start(ctx, "kubelet", kubelet, []string{
		"--config=" + kubeletConfig,
		"--kubeconfig=" + kubeletKubeconfig,
		"--root-dir=" + filepath.Join(dir, "kubelet"),
		"--cert-dir=" + filepath.Join(dir, "kubelet", "pki"),
		"--hostname-override=" + RealNodeName,
		"--node-ip=" + NodeIP,
		"--node-labels=" + RealNodeLabel + "=true",
		"--v=1",
	}, true, nil)
}

// startRegistry starts the node's registry on a free loopback port and
// points containerd's hosts configuration for localhost at it.
func (cp *ControlPlane) startRegistry(ctx context.Context, bin string) error {
	dir := cp.Node.Dir
	_ = os.Remove(RegistryAddrFile)
	args := []string{
		"--addr=127.0.0.1:0",
		"--dir=" + filepath.Join(dir, "registry"),
		"--log=" + filepath.Join(dir, "registry.log"),
		"--addr-file=" + RegistryAddrFile,
	}
	if err := cp.start(ctx, "registry", bin, args, true, func(ctx context.Context) error {
		addr, err := os.ReadFile(RegistryAddrFile)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+strings.TrimSpace(string(addr))+"/v2/", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /v2/: %s", resp.Status)
		}
		return nil
	}); err != nil {
		return err
	}
	addr, err := os.ReadFile(RegistryAddrFile)
	if err != nil {
		return err
	}
	cp.Node.Registry = strings.TrimSpace(string(addr))
	hosts := filepath.Join(dir, "certs.d", "localhost")
	if err := os.MkdirAll(hosts, 0o700); err != nil {
		return err
	}
	r := cp.Node.Registry
	return os.WriteFile(filepath.Join(hosts, "hosts.toml"), []byte(fmt.Sprintf(registryHostsTOML, r, r)), 0o600)
}

func (cp *ControlPlane) waitNodeReady(ctx context.Context, timeout time.Duration) error {
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	began := time.Now()
	kubelet, _, _ := cp.component("kubelet")
	return cp.waitFor(ctx, kubelet, timeout, func(ctx context.Context) error {
		node, err := client.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				cp.logf("node %s Ready %s after the kubelet started", RealNodeName, time.Since(began).Round(time.Millisecond))
				return nil
			}
		}
		return fmt.Errorf("node %s is not Ready", RealNodeName)
	})
}

// ImportImage imports an OCI archive into the real node's runtime, under
// the name its index carries.
func ImportImage(ctx context.Context, archive string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", ContainerdAddress, "-n", "k8s.io",
		"images", "import", "--all-platforms", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s into the node's runtime: %w: %s", archive, err, out)
	}
	return nil
}

// drainNode cordons the real node and deletes its pods, so that the
// kubelet tears their sandboxes down (network namespaces, addresses,
// mounts) before it stops. Best effort: what is left, cleanUpNode removes.
func (cp *ControlPlane) drainNode(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if cp.Config == nil || cp.Ready(ctx) != nil {
		return
	}
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return
	}
	_, err = client.CoreV1().Nodes().Patch(ctx, RealNodeName, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	if err != nil {
		return
	}
	onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + RealNodeName}
	pods, err := client.CoreV1().Pods("").List(ctx, onNode)
	if err != nil {
		return
	}
	grace := int64(1)
	for _, p := range pods.Items {
		err := client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && !apierrors.IsNotFound(err) {
			return
		}
	}
	for ctx.Err() == nil {
		pods, err := client.CoreV1().Pods("").List(ctx, onNode)
		if err != nil || len(pods.Items) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cleanUpNode removes what the node made that outlives its processes:
// containers and their shims, mounts, cgroups, kube-proxy's and the guard's
// rules, the route, the bridge, the runtime's directory; and puts the
// sysctls back. It runs after every process has stopped, and tries every
// step whatever failed before.
func (cp *ControlPlane) cleanUpNode() error {
	var errs []error
	killNodeProcesses()
	errs = append(errs, unmountUnder(cp.Node.Dir, RuntimeDir)...)
	errs = append(errs, removeCgroups()...)
	if cp.Node.KubeProxy != "" {
		// kube-proxy removes its own chains.
		_ = exec.Command(cp.Node.KubeProxy, "--cleanup").Run()
	}
	// The kubelet's (KUBE-FIREWALL, KUBE-KUBELET-CANARY, ...) it leaves.
	removeKubeChains()
	for _, s := range [][]string{
		{"iptables", "-w", "-D", "FORWARD", "-j", GuardChain},
		{"iptables", "-w", "-D", "OUTPUT", "-j", GuardHostChain},
		{"iptables", "-w", "-F", GuardChain},
		{"iptables", "-w", "-X", GuardChain},
		{"iptables", "-w", "-F", GuardHostChain},
		{"iptables", "-w", "-X", GuardHostChain},
		{"ip6tables", "-w", "-D", "FORWARD", "-j", GuardChain},
		{"ip6tables", "-w", "-F", GuardChain},
		{"ip6tables", "-w", "-X", GuardChain},
		{"ip", "route", "del", ServiceCIDR, "dev", Bridge},
	} {
		_ = run(s...) // absent already is fine; Leftovers is the check
	}
	// Veths whose pods were not torn down go with the bridge's ports.
	if out, err := exec.Command("ip", "-o", "link", "show", "master", Bridge).Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				_ = run("ip", "link", "del", strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
			}
		}
	}
	_ = run("ip", "link", "del", Bridge)
	for key, value := range cp.Node.Sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(RuntimeDir); err != nil {
		errs = append(errs, err)
	}
	if left := NodeLeftovers(cp.Node.Dir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("the real node left behind: %s", strings.Join(left, "; ")))
	}
	return errors.Join(errs...)
}

// removeKubeChains removes, in both address families and every table, the
// rules that jump to a KUBE-* chain and then those chains. Only one real
// node runs on a machine, so every such chain is the node's.
func removeKubeChains() {
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			out, err := exec.Command(ipt, "-w", "-t", table, "-S").Output()
			if err != nil {
				continue
			}
			var chains []string
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				switch {
				case len(f) == 2 && f[0] == "-N" && strings.HasPrefix(f[1], "KUBE-"):
					chains = append(chains, f[1])
				case len(f) > 2 && f[0] == "-A" && !strings.HasPrefix(f[1], "KUBE-") && strings.Contains(line, " -j KUBE-"):
					// iptables -S quotes what needs it; the rules kube
					// components write have no spaces inside a value but
					// comments, which -S quotes: unquote simply.
					args := append([]string{"-w", "-t", table, "-D"}, splitRule(line)[1:]...)
					_ = exec.Command(ipt, args...).Run()
				}
			}
			for _, c := range chains {
				_ = exec.Command(ipt, "-w", "-t", table, "-F", c).Run()
			}
			for _, c := range chains {
				_ = exec.Command(ipt, "-w", "-t", table, "-X", c).Run()
			}
		}
	}
}

// splitRule splits a line of iptables -S into arguments, honouring the
// double quotes it puts around values with spaces.
func splitRule(line string) []string {
	var args []string
	var cur strings.Builder
	quoted, have := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, have = !quoted, true
		case r == ' ' && !quoted:
			if have {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		args = append(args, cur.String())
	}
	return args
}

// NodeLeftovers lists what of a real node is still on this machine:
// processes, mounts, cgroups, iptables chains, the route and the bridge.
// Empty after a clean stop; dir is the node's state directory ("" to skip
// the mounts check under it).
func NodeLeftovers(dir string) []string {
	var left []string
	if pids := nodeProcesses(); len(pids) > 0 {
		left = append(left, fmt.Sprintf("processes %v", pids))
	}
	for _, m := range mountsUnder(dir, RuntimeDir) {
		left = append(left, "mount "+m)
	}
	for _, c := range kubepodsCgroups() {
		left = append(left, "cgroup "+c)
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			out, err := exec.Command(ipt, "-w", "-t", table, "-S").Output()
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "-N" && (strings.HasPrefix(f[1], "HANDROLL-") || strings.HasPrefix(f[1], "KUBE-")) {
					left = append(left, ipt+" chain "+table+"/"+f[1])
				}
			}
		}
	}
	if out, _ := exec.Command("ip", "route", "show", ServiceCIDR).Output(); len(strings.TrimSpace(string(out))) > 0 {
		left = append(left, "route "+strings.TrimSpace(string(out)))
	}
	if err := exec.Command("ip", "link", "show", Bridge).Run(); err == nil {
		left = append(left, "bridge "+Bridge)
	}
	if _, err := os.Stat(RuntimeDir); err == nil {
		left = append(left, "directory "+RuntimeDir)
	}
	return left
}

// nodeProcesses are the pids of the node's shims, its registry and anything
// in a pod's cgroup.
func nodeProcesses() []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if strings.Contains(args[0], "containerd-shim") && slices.Contains(args, ContainerdAddress) ||
			slices.Contains(args, "--addr-file="+RegistryAddrFile) {
			pids = append(pids, pid)
		}
	}
	for _, c := range kubepodsCgroups() {
		data, _ := os.ReadFile(filepath.Join(c, "cgroup.procs"))
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func killNodeProcesses() {
	for range 3 {
		pids := nodeProcesses()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// kubepodsCgroups lists the kubelet's cgroups (cgroupfs driver: "kubepods"
// at the root of each hierarchy), deepest first.
func kubepodsCgroups() []string {
	var dirs []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if fi, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil && fi.IsDir() {
		roots = append(roots, "/sys/fs/cgroup/kubepods")
	}
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return dirs
}

func removeCgroups() []error {
	var errs []error
	for _, dir := range kubepodsCgroups() {
		if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
		}
	}
	return errs
}

// mountsUnder lists the mount points below any of dirs, deepest first.
func mountsUnder(dirs ...string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		point := unescapeMount(f[4])
		for _, d := range dirs {
			if d != "" && (point == d || strings.HasPrefix(point, strings.TrimSuffix(d, "/")+"/")) {
				mounts = append(mounts, point)
				break
			}
		}
	}
	slices.SortFunc(mounts, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return slices.Compact(mounts)
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

func unmountUnder(dirs ...string) []error {
	var errs []error
	for range 3 {
		mounts := mountsUnder(dirs...)
		if len(mounts) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
			}
		}
	}
	return errs
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// nodeTokens are the static tokens of the node's two identities.
type nodeTokens struct{ kubelet, proxy string }

// The node components' configuration files. Each value is one this machine
// needs; docs/real-node.md says why.
const (
	// %s: kubeconfig, hostname; %s cluster CIDR; %d healthz and metrics
	// ports (loopback); %s the node address NodePorts are limited to.
	kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: ["%s/32"]
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
`
	// %s: bridge, subnet, gateway, host-local's data directory.
	cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "handroll",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`
	// %s: root, state, socket, sandbox image, runc root, CNI bin and conf
	// directories, registry hosts directory.
	containerdConfig = `version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # runc cannot lower oom_score_adj here; without this every sandbox fails.
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    # One directory per registry host: hosts.toml says where to pull from.
    config_path = %q
`
	// %s: the local registry's address, twice. Images named
	// localhost/NAME:TAG are pulled from it, over plain HTTP on loopback.
	registryHostsTOML = `server = "http://%s"

[host."http://%s"]
  capabilities = ["pull", "resolve"]
`
	// %s: address, client CA, runtime endpoint, pods' log directory, taint
	// key.
	kubeletConfigYAML = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization:
  mode: Webhook
containerRuntimeEndpoint: %[3]s
imageServiceEndpoint: %[3]s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
resolvConf: ""
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
serializeImagePulls: false
maxPods: 50
podLogsDir: %q
registerWithTaints:
- key: %s
  value: "true"
  effect: NoSchedule
`
)
