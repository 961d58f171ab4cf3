package leader

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"
)

// The flags, named as kube-controller-manager and kube-scheduler name theirs.
const (
	FlagLeaderElect   = "leader-elect"
	FlagResourceName  = "leader-elect-resource-name"
	FlagNamespace     = "leader-elect-resource-namespace"
	FlagLeaseDuration = "leader-elect-lease-duration"
	FlagRenewDeadline = "leader-elect-renew-deadline"
	FlagRetryPeriod   = "leader-elect-retry-period"
	FlagWarmStandby   = "leader-elect-warm-standby"
)

const (
	// DefaultLeaseName is the Lease's name unless --leader-elect-resource-name
	// says otherwise (the Manager's LeaderElectionID).
	DefaultLeaseName = "handroll-leader"
	// FallbackNamespace holds the Lease when handroll runs outside a cluster
	// and no namespace is given.
	FallbackNamespace = "handroll-system"

	// inClusterNamespaceFile is where the kubelet mounts the pod's namespace
	// along with its service-account token.
	inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

// Options configure leader election. Build them with DefaultOptions, then
// change fields or bind them to flags with AddFlags.
type Options struct {
	// Enabled turns leader election on. Off, Run starts the work at once:
	// right for a single replica or a local run, wrong for two replicas.
	Enabled bool

	// LeaseName and LeaseNamespace name the coordination.k8s.io/v1 Lease.
	// An empty LeaseNamespace means DefaultNamespace().
	LeaseName, LeaseNamespace string

	// LeaseDuration is how long a standby waits, after it last saw the Lease
	// change, before it takes the Lease over. RenewDeadline is how long the
	// leader keeps retrying a failed renewal before it gives up. RetryPeriod
	// is the interval between attempts of either.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// Identity is written into the Lease's holderIdentity. Empty: New calls
	// NewIdentity. It must differ between replicas.
	Identity string

	// ReleaseOnCancel empties the Lease on a graceful stop, after the work
	// has stopped, so that a standby takes over within a retry period
	// instead of waiting out the lease duration.
	ReleaseOnCancel bool

	// WarmStandby has every replica fill its caches before the election, so
	// that a new leader reconciles at once; off, a replica lists and watches
	// only once it leads (less load on the API server and less memory on
	// standbys, a slower failover). Run does not read it: the caller starts
	// the caches before Run or in its callback.
	WarmStandby bool
}

// DefaultOptions are the flags' defaults: leader election on, the Lease
// handroll-leader in DefaultNamespace(), 15 s / 10 s / 2 s (the values of
// kube-controller-manager and controller-runtime), released on a graceful
// stop.
func DefaultOptions() Options {
	return Options{
		Enabled:         true,
		LeaseName:       DefaultLeaseName,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		WarmStandby:     true,
	}
}

// AddFlags binds the leader election flags to o, with DefaultOptions' values
// as their defaults. Identity and ReleaseOnCancel have no flag: call it on
// DefaultOptions() so that they keep their defaults.
//
//	opts := leader.DefaultOptions()
//	opts.AddFlags(fs)
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	d := DefaultOptions()
	fs.BoolVar(&o.Enabled, FlagLeaderElect, d.Enabled,
		"Elect a leader among the replicas through a Lease, so that one replica at a time runs the controllers.")
	fs.StringVar(&o.LeaseName, FlagResourceName, d.LeaseName,
		"Name of the coordination.k8s.io/v1 Lease used for leader election.")
	fs.StringVar(&o.LeaseNamespace, FlagNamespace, d.LeaseNamespace,
		"Namespace of the leader election Lease. Empty: the pod's namespace in a cluster (or $POD_NAMESPACE), else "+FallbackNamespace+".")
	fs.DurationVar(&o.LeaseDuration, FlagLeaseDuration, d.LeaseDuration,
		"How long a standby waits after the leader's last renewal before it takes the Lease over; whole seconds.")
	fs.DurationVar(&o.RenewDeadline, FlagRenewDeadline, d.RenewDeadline,
		"How long the leader retries renewing the Lease before it gives up leadership and exits.")
	fs.DurationVar(&o.RetryPeriod, FlagRetryPeriod, d.RetryPeriod,
		"Interval between attempts to acquire or renew the Lease.")
	fs.BoolVar(&o.WarmStandby, FlagWarmStandby, d.WarmStandby,
		"Fill the caches on every replica before the election, so that a new leader reconciles at once. Off: a replica lists and watches only once it leads.")
}

// Validate reports options that client-go would refuse, or that would let two
// replicas lead at once, naming the flag to change. Disabled options are not
// checked: nothing reads them.
func (o Options) Validate() error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if o.LeaseName == "" {
		add("--%s must not be empty", FlagResourceName)
	} else if msgs := validation.IsDNS1123Subdomain(o.LeaseName); len(msgs) > 0 {
		add("--%s %q is not a valid Lease name: %s", FlagResourceName, o.LeaseName, strings.Join(msgs, "; "))
	}
	if o.LeaseNamespace != "" {
		if msgs := validation.IsDNS1123Label(o.LeaseNamespace); len(msgs) > 0 {
			add("--%s %q is not a valid namespace name: %s", FlagNamespace, o.LeaseNamespace, strings.Join(msgs, "; "))
		}
	}

	positive := true
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{FlagLeaseDuration, o.LeaseDuration}, {FlagRenewDeadline, o.RenewDeadline}, {FlagRetryPeriod, o.RetryPeriod}} {
		if d.v <= 0 {
			add("--%s must be positive, got %s", d.flag, d.v)
			positive = false
		}
	}
	if !positive {
		return errors.Join(errs...)
	}

	// The Lease records whole seconds (client-go truncates): a standby reading
	// 4 where the leader counts 4.5 s could take over while the leader still
	// believes it leads.
	if o.LeaseDuration%time.Second != 0 {
		add("--%s must be a whole number of seconds, got %s: the Lease stores whole seconds", FlagLeaseDuration, o.LeaseDuration)
	}
	// client-go's LeaderElector refuses these two.
	if o.LeaseDuration <= o.RenewDeadline {
		add("--%s (%s) must be greater than --%s (%s): the leader must give up before a standby may take the Lease over",
			FlagLeaseDuration, o.LeaseDuration, FlagRenewDeadline, o.RenewDeadline)
	} else if timeout := o.RequestTimeout(); o.LeaseDuration <= o.RenewDeadline+o.RetryPeriod+timeout {
		// Stricter than client-go. The API server applies a renewal and a
		// standby may see it at once; the leader learns of its success only
		// when the response arrives, up to the request timeout later. It
		// then waits a retry period, and retries for up to the renew
		// deadline, before it gives up. A standby takes over a lease
		// duration after it saw the renewal: the leader must be gone by
		// then.
		add("--%s (%s) must be greater than --%s plus --%s plus the Lease request timeout (%s + %s + %s = %s): a leader that cannot renew gives up only that long after the API server accepted its last renewal",
			FlagLeaseDuration, o.LeaseDuration, FlagRenewDeadline, FlagRetryPeriod, o.RenewDeadline, o.RetryPeriod, timeout, o.RenewDeadline+o.RetryPeriod+timeout)
	}
	if minDeadline := time.Duration(leaderelection.JitterFactor * float64(o.RetryPeriod)); o.RenewDeadline <= minDeadline {
		add("--%s (%s) must be greater than %.1f × --%s (%.1f × %s = %s): the leader needs room to retry a failed renewal",
			FlagRenewDeadline, o.RenewDeadline, leaderelection.JitterFactor, FlagRetryPeriod, leaderelection.JitterFactor, o.RetryPeriod, minDeadline)
	}
	return errors.Join(errs...)
}

// minRequestTimeout is the least time a Lease request is given: below it, a
// loaded API server would fail renewals that it would have answered.
const minRequestTimeout = time.Second

// RequestTimeout bounds each request of the elector's Lease client: one
// retry period (at least a second). A renewal that has not been answered by
// the time the next attempt is due is abandoned, so one hung request cannot
// use up the renew deadline; and it bounds how late the answer to the last
// successful renewal can arrive, which Validate accounts for.
func (o Options) RequestTimeout() time.Duration {
	return max(o.RetryPeriod, minRequestTimeout)
}

// DefaultNamespace is the Lease's namespace when none is given: the pod's
// own namespace in a cluster (the service-account mount, or $POD_NAMESPACE
// set through the downward API), else FallbackNamespace.
func DefaultNamespace() string {
	return defaultNamespace(inClusterNamespaceFile, os.Getenv)
}

func defaultNamespace(file string, getenv func(string) string) string {
	if b, err := os.ReadFile(file); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	if ns := strings.TrimSpace(getenv("POD_NAMESPACE")); ns != "" {
		return ns
	}
	return FallbackNamespace
}

// NewIdentity returns hostname_uuid, as controller-runtime does: the host
// name (the pod's name in a cluster) tells a person which replica leads; the
// UUID keeps two processes on one host, or a restarted pod, distinct.
func NewIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader election identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}
