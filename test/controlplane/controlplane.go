package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/handroll/handroll/test/budget"
)

// Options say which components to start and where.
type Options struct {
	// BinDir holds the binaries. Empty: see FindBinaries.
	BinDir string
	// Dir is the control plane's state directory (data, certificates, logs).
	// Empty: a new temporary directory, removed by Stop.
	Dir string

	// Controllers starts kube-controller-manager and kube-scheduler, so that
	// Deployments create ReplicaSets and Pods, Pods are scheduled, and owned
	// objects are garbage-collected.
	Controllers bool
	// Nodes starts kwok and registers this many fake nodes, whose pods kwok
	// reports Running and Ready. It implies Controllers.
	Nodes int
	// ControllerArgs are extra flags of kube-controller-manager and
	// kube-scheduler alike (both take --kube-api-qps and --kube-api-burst),
	// appended last.
	ControllerArgs []string
	// DisabledControllers are kube-controller-manager's controllers not to
	// run (by their --controllers names), for a cluster that has no use
	// for what they write.
	DisabledControllers []string

	// CRDDirs are directories of CustomResourceDefinition YAML files to
	// install; Start returns once each is Established.
	CRDDirs []string

	// APIServerArgs are extra kube-apiserver flags, appended last so that
	// they override the harness's (for example --feature-gates).
	APIServerArgs []string

	// Detach starts the components in their own sessions so that they outlive
	// this process (for `make cluster-up`); Stop must then be called through
	// Load. Without Detach, the components die with this process.
	Detach bool

	// RealNode, when set, starts a real node (RealNodeName) beside the fake
	// ones: kube-proxy, containerd and a kubelet, on a bridge that no packet
	// leaves. It needs root, Detach and what RealNodeMissing checks, and
	// implies Controllers.
	RealNode *RealNodeOptions

	// Progress, when set, receives one line per step.
	Progress io.Writer
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	Dir        string `json:"dir"`
	Kubeconfig string `json:"kubeconfig"`
	Server     string `json:"server"`
	// BinDir holds the binaries the control plane runs, kubectl among them.
	BinDir    string     `json:"binDir"`
	Processes []*Process `json:"processes"`

	// Node is the real node's state, when there is one.
	Node *NodeState `json:"node,omitempty"`

	// Config is an admin rest.Config for the API server.
	Config *rest.Config `json:"-"`

	ownsDir  bool
	watchdog *Process
	progress io.Writer
}

// kubernetesServiceIP is the first address of ServiceCIDR, which the API
// server gives the kubernetes Service.
const kubernetesServiceIP = "10.96.0.1"

// The admin credential is a static token of a system:masters user; the
// token is random per control plane.
const adminUser = "handroll-admin"

// Start starts the components named by opts and waits until each is ready.
// On failure it stops whatever it started and returns an error naming the
// component, with the end of its log.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	bins, err := FindBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if err := completeOptions(&opts); err != nil {
		return nil, err
	}
	cp, err := newControlPlane(opts, bins)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = cp.Stop()
		}
	}()
	if !opts.Detach && cp.ownsDir {
		if cp.watchdog, err = startWatchdog(cp.Dir); err != nil {
			return nil, err
		}
	}

	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	apiHost, extraIPs, err := cp.apiServerAddress(opts)
	if err != nil {
		return nil, err
	}
	cp.Server = "https://" + apiHost + ":" + strconv.Itoa(apiPort)
	creds, err := cp.writeCredentials(opts, extraIPs)
	if err != nil {
		return nil, err
	}

	etcdURL, err := cp.startEtcd(ctx, bins, opts, etcdClient, etcdPeer)
	if err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx, bins, opts, creds, etcdURL, apiHost, apiPort); err != nil {
		return nil, err
	}
	if opts.Controllers {
		if err := cp.startControllers(ctx, bins, opts, creds.pki); err != nil {
			return nil, err
		}
	}
	if opts.RealNode != nil {
		if err := cp.startRealNode(ctx, bins, *opts.RealNode, creds.tokens, creds.pki.caCert); err != nil {
			return nil, err
		}
	}
	if opts.Nodes > 0 {
		if err := cp.startKwok(ctx, bins, opts); err != nil {
			return nil, err
		}
	}

	if err := cp.afterStart(ctx, opts); err != nil {
		return nil, err
	}
	return cp, nil
}

// completeOptions turns on what opts implies and refuses a real node the
// machine cannot run.
func completeOptions(opts *Options) error {
	if opts.Nodes > 0 || opts.RealNode != nil {
		opts.Controllers = true
	}
	if opts.RealNode != nil {
		if !opts.Detach {
			return errors.New("a real node needs Detach: its network outlives a crashed test process, and only Stop removes it")
		}
		if missing := RealNodeMissing(); len(missing) > 0 {
			return fmt.Errorf("a real node needs %s", strings.Join(missing, ", "))
		}
	}
	return nil
}

// newControlPlane makes the control plane's directory, a temporary one
// unless opts.Dir names it, with its subdirectories.
func newControlPlane(opts Options, bins *binaries) (*ControlPlane, error) {
	cp := &ControlPlane{Dir: opts.Dir, BinDir: bins.dir, progress: opts.Progress}
	if cp.Dir == "" {
		dir, err := os.MkdirTemp("", "handroll-controlplane-")
		if err != nil {
			return nil, err
		}
		cp.Dir, cp.ownsDir = dir, true
	}
	for _, sub := range []string{"logs", "pids", "pki", "etcd"} {
		if err := os.MkdirAll(filepath.Join(cp.Dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// apiServerAddress is where the API server listens: loopback; with a real
// node, the bridge's address instead, which pods reach through the
// kubernetes Service, whose network it sets up. extraIPs are the serving
// certificate's addresses beyond loopback.
func (cp *ControlPlane) apiServerAddress(opts Options) (host string, extraIPs []net.IP, err error) {
	if opts.RealNode == nil {
		return "127.0.0.1", nil, nil
	}
	if err := cp.claimNode(); err != nil {
		return "", nil, err
	}
	cp.Node = &NodeState{Dir: filepath.Join(cp.Dir, "node"), Sysctls: map[string]string{}}
	if err := cp.setUpNodeNetwork(); err != nil {
		return "", nil, err
	}
	return NodeIP, []net.IP{net.ParseIP(NodeIP), net.ParseIP(kubernetesServiceIP)}, nil
}

// credentials are the control plane's certificates and static tokens.
type credentials struct {
	pki       *pki
	tokens    nodeTokens
	tokenFile string
}

// writeCredentials writes the certificates, the token file (the admin's,
// and with a real node its kubelet's and kube-proxy's) and the admin
// kubeconfig, and sets cp.Config.
func (cp *ControlPlane) writeCredentials(opts Options, extraIPs []net.IP) (credentials, error) {
	var c credentials
	var err error
	if c.pki, err = writePKI(filepath.Join(cp.Dir, "pki"), extraIPs...); err != nil {
		return c, fmt.Errorf("writing certificates: %w", err)
	}
	var token string
	for _, t := range []*string{&token, &c.tokens.kubelet, &c.tokens.proxy} {
		if *t, err = randomToken(); err != nil {
			return c, err
		}
	}
	tokenLines := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", token, adminUser, adminUser)
	if opts.RealNode != nil {
		// The Node authorizer knows a kubelet by this user and group; the
		// bootstrap RBAC binds system:node-proxier to system:kube-proxy.
		tokenLines += fmt.Sprintf("%s,system:node:%s,system:node:%[2]s,\"system:nodes\"\n", c.tokens.kubelet, RealNodeName)
		tokenLines += fmt.Sprintf("%s,system:kube-proxy,system:kube-proxy\n", c.tokens.proxy)
	}
	c.tokenFile = filepath.Join(cp.Dir, "pki", "tokens.csv")
	if err := os.WriteFile(c.tokenFile, []byte(tokenLines), 0o600); err != nil {
		return c, err
	}
	cp.Config = &rest.Config{
		Host:            cp.Server,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.caPEM},
		QPS:             200,
		Burst:           400,
	}
	cp.Kubeconfig = filepath.Join(cp.Dir, "kubeconfig")
	return c, writeKubeconfig(cp.Kubeconfig, cp.Server, c.pki.caPEM, token)
}

// startEtcd starts etcd on loopback and returns its client URL.
func (cp *ControlPlane) startEtcd(ctx context.Context, bins *binaries, opts Options, clientPort, peerPort int) (string, error) {
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	return etcdURL, cp.start(ctx, "etcd", bins.path("etcd"), []string{
		"--name=default",
		"--data-dir=" + filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls=" + etcdURL,
		"--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		// Test data need not survive a power cut; fsync dominates etcd's
		// latency on small machines.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}, opts.Detach, func(ctx context.Context) error { return httpOK(ctx, nil, etcdURL+"/health") })
}

// startAPIServer starts kube-apiserver and waits for its /readyz.
func (cp *ControlPlane) startAPIServer(ctx context.Context, bins *binaries, opts Options, creds credentials, etcdURL, apiHost string, apiPort int) error {
	pki := creds.pki
	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + apiHost,
		"--advertise-address=" + apiHost,
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(cp.Dir, "pki"),
		"--tls-cert-file=" + pki.servingCrt,
		"--tls-private-key-file=" + pki.servingKey,
		"--client-ca-file=" + pki.caCert,
		"--token-auth-file=" + creds.tokenFile,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + pki.saKey,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
	}
	admission := "NamespaceLifecycle,ServiceAccount,PodSecurity,DefaultStorageClass,ResourceQuota,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy"
	if opts.RealNode == nil {
		apiArgs = append(apiArgs,
			// The default reconciler refuses a loopback advertise address.
			"--endpoint-reconciler-type=none",
			"--authorization-mode=RBAC",
			"--enable-admission-plugins="+admission)
	} else {
		apiArgs = append(apiArgs,
			// The kubernetes Service's endpoint is the bridge address, so
			// that rest.InClusterConfig works in the node's pods.
			"--endpoint-reconciler-type=lease",
			"--authorization-mode=Node,RBAC",
			// PodNodeSelector and PodTolerationRestriction: a namespace's
			// annotations can send all its pods to the real node.
			"--enable-admission-plugins="+admission+",NodeRestriction,PodNodeSelector,PodTolerationRestriction",
			"--kubelet-client-certificate="+pki.kubeletClientCrt,
			"--kubelet-client-key="+pki.kubeletClientKey,
			"--kubelet-preferred-address-types=InternalIP,Hostname",
			// Webhook Services are called at their endpoints' addresses, as
			// the API server has no kube-proxy of its own to go through.
			"--enable-aggregator-routing=true")
	}
	return cp.start(ctx, "kube-apiserver", bins.path("kube-apiserver"), append(apiArgs, opts.APIServerArgs...), opts.Detach, func(ctx context.Context) error { return httpOK(ctx, cp.Config, cp.Server+"/readyz") })
}

// startControllers starts kube-controller-manager and kube-scheduler.
func (cp *ControlPlane) startControllers(ctx context.Context, bins *binaries, opts Options, pki *pki) error {
	if err := cp.start(ctx, "kube-controller-manager", bins.path("kube-controller-manager"), append([]string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--authentication-kubeconfig=" + cp.Kubeconfig,
		"--authorization-kubeconfig=" + cp.Kubeconfig,
		"--controllers=" + strings.Join(append([]string{"*"}, prefixed("-", opts.DisabledControllers)...), ","),
		"--service-account-private-key-file=" + pki.saKey,
		"--root-ca-file=" + pki.caCert,
		"--use-service-account-credentials=false",
		"--secure-port=0",
		"--leader-elect=false",
		"--concurrent-gc-syncs=5",
		// kwok renews the fake nodes' leases from this same small
		// machine; under load a renewal can be late. The default
		// grace would then mark every node NotReady and its pods
		// unready, which is a fault of the test bed, not of the code
		// under test.
		"--node-monitor-grace-period=5m",
	}, opts.ControllerArgs...), opts.Detach, nil); err != nil {
		return err
	}
	return cp.start(ctx, "kube-scheduler", bins.path("kube-scheduler"), append([]string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--authentication-kubeconfig=" + cp.Kubeconfig,
		"--authorization-kubeconfig=" + cp.Kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
	}, opts.ControllerArgs...), opts.Detach, nil)
}

// startKwok starts kwok, which plays the fake nodes.
func (cp *ControlPlane) startKwok(ctx context.Context, bins *binaries, opts Options) error {
	args := []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		"--server-address=",
		// The node stages are kwok's heartbeat-with-lease: a node's
		// status is written only every 10 to 20 minutes, and its
		// Lease is what says it is alive. Without Leases (kwok's
		// default, 0) every node turned NotReady once the
		// controller-manager's grace period ran out, and the pods it
		// then marked not ready were never made ready again.
		"--node-lease-duration-seconds=40",
	}
	for _, stage := range bins.stages {
		args = append(args, "--config="+stage)
	}
	return cp.start(ctx, "kwok", bins.path("kwok"), args, opts.Detach, nil)
}

// start starts one component and waits for ready (when given) or for a
// short settle time, failing early if the process exits.
func (cp *ControlPlane) start(ctx context.Context, name, bin string, args []string, detach bool, ready func(context.Context) error) error {
	began := time.Now()
	cp.logf("starting %s", name)
	p, err := startProcess(name, bin, args, filepath.Join(cp.Dir, "logs"), filepath.Join(cp.Dir, "pids"), detach)
	if p != nil {
		p.bin, p.args, p.detach, p.ready = bin, args, detach, ready
		cp.Processes = append(cp.Processes, p)
	}
	if err != nil {
		return err
	}
	return cp.waitStarted(ctx, p, began)
}

// waitStarted waits for p's readiness probe or, without one, a short
// settle time, failing early if the process exits.
func (cp *ControlPlane) waitStarted(ctx context.Context, p *Process, began time.Time) error {
	ready := p.ready
	if ready == nil {
		// Components without a probe here must at least stay up.
		ready = func(context.Context) error { return nil }
		select {
		case <-p.exited:
		case <-time.After(500 * time.Millisecond):
		}
	}
	if err := cp.waitFor(ctx, p, budget.Scale(90*time.Second), ready); err != nil {
		return err
	}
	cp.logf("%s ready in %s", p.Name, time.Since(began).Round(time.Millisecond))
	return nil
}

// StopComponent stops one component, such as "kube-apiserver" or "etcd",
// as an outage would: SIGTERM, then SIGKILL after grace. The others keep
// running. StartComponent brings it back.
func (cp *ControlPlane) StopComponent(name string, grace time.Duration) error {
	p, _, err := cp.component(name)
	if err != nil {
		return err
	}
	cp.logf("stopping %s", name)
	return p.stop(grace)
}

// StartComponent starts a component stopped by StopComponent again, with
// the same binary, flags, data directory and ports, and waits until it is
// ready.
func (cp *ControlPlane) StartComponent(ctx context.Context, name string) error {
	p, i, err := cp.component(name)
	if err != nil {
		return err
	}
	if p.Running() {
		return fmt.Errorf("%s is running", name)
	}
	if p.bin == "" {
		return fmt.Errorf("%s was not started by this process; it cannot be restarted", name)
	}
	began := time.Now()
	cp.logf("starting %s again", name)
	np, err := startProcess(name, p.bin, p.args, filepath.Join(cp.Dir, "logs"), filepath.Join(cp.Dir, "pids"), p.detach)
	if np == nil {
		return err
	}
	np.bin, np.args, np.detach, np.ready = p.bin, p.args, p.detach, p.ready
	cp.Processes[i] = np
	if err != nil {
		return err
	}
	return cp.waitStarted(ctx, np, began)
}

// EditComponentArgs changes the flags a stopped component starts with at
// its next StartComponent, as an operator restarting a server with another
// configuration does (say, an API server without a feature gate).
func (cp *ControlPlane) EditComponentArgs(name string, edit func([]string) []string) error {
	p, _, err := cp.component(name)
	if err != nil {
		return err
	}
	if p.Running() {
		return fmt.Errorf("%s is running: stop it first", name)
	}
	p.args = edit(slices.Clone(p.args))
	return nil
}

func (cp *ControlPlane) component(name string) (*Process, int, error) {
	for i, p := range cp.Processes {
		if p.Name == name {
			return p, i, nil
		}
	}
	return nil, 0, fmt.Errorf("no component named %q", name)
}

// waitFor polls ready until it succeeds, p exits, or the timeout passes.
func (cp *ControlPlane) waitFor(ctx context.Context, p *Process, timeout time.Duration, ready func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if !p.Running() {
			return p.exitError()
		}
		if last = ready(ctx); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %w; last lines of %s:\n%s", p.Name, timeout, last, p.LogPath, p.tail(30))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", p.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops the components in reverse order of start (kwok, scheduler,
// controller-manager, apiserver, etcd) and removes the directory it created.
// It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	if cp == nil {
		return nil
	}
	if cp.watchdog != nil {
		// Stop is doing the watchdog's job; it must not race us to rm -rf.
		_ = cp.watchdog.stop(time.Second)
		cp.watchdog = nil
	}
	if cp.Node != nil {
		// While the API server still runs: the kubelet tears its pods down.
		cp.drainNode(45 * time.Second)
	}
	var errs []error
	for i := len(cp.Processes) - 1; i >= 0; i-- {
		p := cp.Processes[i]
		if err := p.stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
		_ = os.Remove(filepath.Join(cp.Dir, "pids", p.Name))
	}
	if cp.Node != nil {
		if err := cp.cleanUpNode(); err != nil {
			errs = append(errs, err)
		}
	}
	if cp.ownsDir && len(errs) == 0 {
		if err := os.RemoveAll(cp.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Running returns the components that are running and those that are not.
func (cp *ControlPlane) Running() (up, down []string) {
	for _, p := range cp.Processes {
		if p.Running() {
			up = append(up, p.Name)
		} else {
			down = append(down, p.Name)
		}
	}
	return up, down
}

// Logs returns the end of every component's log, for a failed test's output.
func (cp *ControlPlane) Logs(lines int) string {
	var b strings.Builder
	for _, p := range cp.Processes {
		fmt.Fprintf(&b, "--- %s (%s) ---\n%s\n", p.Name, p.LogPath, p.tail(lines))
	}
	return b.String()
}

// Ready reports whether the API server answers /readyz.
func (cp *ControlPlane) Ready(ctx context.Context) error {
	return httpOK(ctx, cp.Config, cp.Server+"/readyz")
}

func (cp *ControlPlane) logf(format string, args ...any) {
	if cp.progress != nil {
		fmt.Fprintf(cp.progress, "controlplane: "+format+"\n", args...)
	}
}

// Save writes the control plane's description to path, so that another
// process can Load it to report status or stop it.
func (cp *ControlPlane) Save(path string) error {
	data, err := json.MarshalIndent(cp, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// Load reads what Save wrote. The processes are watched by pid.
func Load(path string) (*ControlPlane, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{}
	if err := json.Unmarshal(data, cp); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	cp.Config, err = clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig of %s: %w", path, err)
	}
	return cp, nil
}

func writeKubeconfig(path, server string, ca []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[adminUser] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: adminUser, Namespace: "default"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

// httpOK GETs url and succeeds on 200. With cfg, it authenticates and
// verifies TLS as an admin client would.
func httpOK(ctx context.Context, cfg *rest.Config, url string) error {
	client := http.DefaultClient
	if cfg != nil {
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			return err
		}
		client = &http.Client{Transport: rt}
	}
	ctx, cancel := context.WithTimeout(ctx, budget.Scale(2*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// freePorts returns n distinct free loopback ports. All listeners are held
// until every port is chosen, so the n ports differ from each other.
//
// The ports come from below the kernel's ephemeral range: a port the
// kernel picks for ":0" is one it may also give, a moment later, to some
// process's outgoing connection, and the component that then binds it
// fails with "address already in use".
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	low, high := portRange()
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("no free loopback port in %d-%d", low, high)
		}
		port := low + mathrand.IntN(high-low)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// FreePort is one port as freePorts chooses them, for a server a test
// starts on loopback.
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// portRange is where freePorts chooses: from 10000 up to the start of
// the ephemeral range (net.ipv4.ip_local_port_range).
func portRange() (low, high int) {
	low, high = 10000, 32768
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return low, high
	}
	f := strings.Fields(string(data))
	if len(f) == 2 {
		if first, err := strconv.Atoi(f[0]); err == nil && first > low+1000 {
			high = first
		}
	}
	return low, high
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// prefixed is each of names with p before it.
func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}
