package leader

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection"
)

// client-go's LeaderElector reports through a process-global metrics
// provider that does nothing until a program installs one. These are the
// names and help texts of controller-runtime's pkg/metrics/leaderelection.go
// (and of component-base's provider in kube-controller-manager), so the same
// dashboards and alerts read them.
var (
	leaderGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leader_election_master_status",
		Help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
	}, []string{"name"})
	slowpathCounter = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leader_election_slowpath_total",
		Help: "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
	}, []string{"name"})

	setProviderOnce sync.Once
)

// registerMetrics makes our gauges client-go's leader election metrics
// provider (client-go honours only the first SetProvider call in a process,
// hence the Once) and registers them in reg. The gauges are process-global
// like the provider, so they may be registered in several registries; the
// label is the Lease's name, so two electors of one Lease in one process
// (tests only) share a series.
func registerMetrics(reg prometheus.Registerer) error {
	setProviderOnce.Do(func() { leaderelection.SetProvider(metricsProvider{}) })
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{leaderGauge, slowpathCounter} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) && already.ExistingCollector == c {
				continue
			}
			return err
		}
	}
	return nil
}

type metricsProvider struct{}

func (metricsProvider) NewLeaderMetric() leaderelection.LeaderMetric { return leaderMetric{} }

type leaderMetric struct{}

func (leaderMetric) On(name string)                { leaderGauge.WithLabelValues(name).Set(1) }
func (leaderMetric) Off(name string)               { leaderGauge.WithLabelValues(name).Set(0) }
func (leaderMetric) SlowpathExercised(name string) { slowpathCounter.WithLabelValues(name).Inc() }
