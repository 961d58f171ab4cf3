package real

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/test/controlplane"
)

// The demo image's dial mode tries TCP connections and logs each result.
const demoImage = "localhost/handroll-demo:1"

// sink is a documentation-only network (RFC 5737), routed to a tun device
// that no program reads: such a device transmits nothing, so nothing can
// leave through it even if the guard failed. Its counters say whether any
// packet reached it.
const (
	sinkDevice = "hrsink0"
	sinkNet    = "198.51.100.0/24"
	sinkAddr   = "198.51.100.7:80"
)

// TestNoPacketLeaves: a pod's connections to an address routed off the
// pod network are dropped by the guard before they reach the interface the
// route names; so is the host's own traffic to a Service address no rule
// translates. The proof is the guard's packet counters and the sink's.
func TestNoPacketLeaves(t *testing.T) {
	run(t, "ip", "tuntap", "add", sinkDevice, "mode", "tun")
	t.Cleanup(func() { _ = exec.Command("ip", "tuntap", "del", sinkDevice, "mode", "tun").Run() })
	run(t, "ip", "link", "set", sinkDevice, "up")
	run(t, "ip", "route", "add", sinkNet, "dev", sinkDevice)
	t.Cleanup(func() { _ = exec.Command("ip", "route", "del", sinkNet, "dev", sinkDevice).Run() })

	// Without the guard, a pod's packet to the sink would go there: the
	// route is the one a pod's packet would take.
	route := run(t, "ip", "route", "get", strings.Split(sinkAddr, ":")[0], "from", "10.244.0.200", "iif", controlplane.Bridge)
	if !strings.Contains(route, "dev "+sinkDevice) {
		t.Fatalf("a pod's packet to %s would not be routed to %s: %s", sinkAddr, sinkDevice, route)
	}

	leaving := controlplane.GuardChain + "/" + controlplane.GuardLeaving
	hostService := controlplane.GuardHostChain + "/" + controlplane.GuardService
	before := counters(t)
	sinkBefore := sinkPackets(t)

	ns := realNamespace(t, "egress", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	ctx := context.Background()
	const attempts = 3
	pod, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dialer"},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name:            "dial",
				Image:           demoImage,
				ImagePullPolicy: corev1.PullNever,
				Args:            []string{"dial", "--count", strconv.Itoa(attempts), "--timeout", "1s", sinkAddr},
				SecurityContext: restricted(),
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var log string
	eventually(t, "the dialer logs its summary", 90*time.Second, func(ctx context.Context) (bool, error) {
		log, err = podLog(ctx, ns, pod.Name, "dial")
		return strings.Contains(log, "dial: "), err
	})
	pod, err = kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeName != controlplane.RealNodeName || !inPodSubnet(pod.Status.PodIP) {
		t.Fatalf("the dialer ran on %q at %q, want %s in %s", pod.Spec.NodeName, pod.Status.PodIP, controlplane.RealNodeName, controlplane.PodSubnet)
	}
	if !strings.Contains(log, "0 connected") {
		t.Errorf("the dialer connected to %s:\n%s", sinkAddr, log)
	}

	// The host's own connection to a Service address that is no Service.
	if c, err := net.DialTimeout("tcp", "10.96.255.254:80", time.Second); err == nil {
		c.Close()
		t.Errorf("the host connected to an unallocated Service address")
	}

	after := counters(t)
	sinkAfter := sinkPackets(t)
	defer func() {
		// The control: the host's own packet to the sink is not the guard's
		// business and reaches the device, so its counters do see packets.
		if c, err := net.DialTimeout("tcp", sinkAddr, 500*time.Millisecond); err == nil {
			c.Close()
		}
		if control := sinkPackets(t); control == sinkAfter {
			t.Errorf("the host's own packet to %s left no trace on %s: its counters prove nothing", sinkAddr, sinkDevice)
		}
	}()
	t.Logf("guard counters before %v, after %v; %s transmitted %d, dropped %d packets", before, after, sinkDevice, sinkAfter[0]-sinkBefore[0], sinkAfter[1]-sinkBefore[1])
	if d := after[leaving] - before[leaving]; d < attempts {
		t.Errorf("the guard dropped %d packets leaving the pod network, want at least one per attempt (%d)", d, attempts)
	}
	if d := after[hostService] - before[hostService]; d < 1 {
		t.Errorf("the guard dropped %d packets of the host to an untranslated Service address, want at least 1", d)
	}
	if sinkAfter != sinkBefore {
		t.Errorf("packets reached %s: transmitted/dropped before %v, after %v", sinkDevice, sinkBefore, sinkAfter)
	}
}

func counters(t *testing.T) map[string]int64 {
	t.Helper()
	c, err := controlplane.GuardCounters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sinkPackets reads the sink's transmitted and dropped-on-transmit counts.
func sinkPackets(t *testing.T) [2]int64 {
	t.Helper()
	var out [2]int64
	for i, name := range []string{"tx_packets", "tx_dropped"} {
		data, err := os.ReadFile(filepath.Join("/sys/class/net", sinkDevice, "statistics", name))
		if err != nil {
			t.Fatal(err)
		}
		if out[i], err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func inPodSubnet(ip string) bool {
	_, subnet, _ := net.ParseCIDR(controlplane.PodSubnet)
	return subnet.Contains(net.ParseIP(ip))
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
