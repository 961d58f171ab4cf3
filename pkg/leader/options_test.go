package leader

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestDefaultOptionsAreValid(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatalf("DefaultOptions().Validate() = %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Options)
		// want are substrings of the error, which must name the flag to change.
		want []string
	}{
		{"lease equals renew", func(o *Options) { o.LeaseDuration, o.RenewDeadline = 10*time.Second, 10*time.Second },
			[]string{"--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)"}},
		{"lease below renew", func(o *Options) { o.LeaseDuration = 5 * time.Second },
			[]string{"--leader-elect-lease-duration (5s) must be greater than --leader-elect-renew-deadline (10s)"}},
		{"lease within renew plus retry", func(o *Options) { o.LeaseDuration = 11 * time.Second },
			[]string{"--leader-elect-lease-duration (11s) must be greater than --leader-elect-renew-deadline plus --leader-elect-retry-period plus the Lease request timeout (10s + 2s + 2s = 14s)"}},
		// The last accepted renewal's answer may arrive a request timeout
		// late: 10 + 2 + 2 leaves 15 - 14 = 1 s, 14 s leaves none.
		{"lease within renew plus retry plus request timeout", func(o *Options) { o.LeaseDuration = 14 * time.Second },
			[]string{"--leader-elect-lease-duration (14s) must be greater than --leader-elect-renew-deadline plus --leader-elect-retry-period plus the Lease request timeout (10s + 2s + 2s = 14s)"}},
		// The request timeout is at least a second, however short the retry period.
		{"short retry period, request timeout a second", func(o *Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
		}, []string{"(3s + 500ms + 1s = 4.5s)"}},
		{"renew not above retry times jitter", func(o *Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 30*time.Second, 2*time.Second, 2*time.Second
		},
			[]string{"--leader-elect-renew-deadline (2s) must be greater than 1.2 × --leader-elect-retry-period (1.2 × 2s = 2.4s)"}},
		{"lease not whole seconds", func(o *Options) { o.LeaseDuration = 15500 * time.Millisecond },
			[]string{"--leader-elect-lease-duration must be a whole number of seconds, got 15.5s"}},
		{"lease below a second", func(o *Options) {
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 500*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
		}, []string{"--leader-elect-lease-duration must be a whole number of seconds, got 500ms"}},
		{"zero retry", func(o *Options) { o.RetryPeriod = 0 },
			[]string{"--leader-elect-retry-period must be positive, got 0s"}},
		{"negative durations", func(o *Options) { o.LeaseDuration, o.RenewDeadline = -time.Second, -time.Second },
			[]string{"--leader-elect-lease-duration must be positive, got -1s", "--leader-elect-renew-deadline must be positive, got -1s"}},
		{"empty name", func(o *Options) { o.LeaseName = "" },
			[]string{"--leader-elect-resource-name must not be empty"}},
		{"bad name", func(o *Options) { o.LeaseName = "Handroll_Leader" },
			[]string{`--leader-elect-resource-name "Handroll_Leader" is not a valid Lease name`}},
		{"bad namespace", func(o *Options) { o.LeaseNamespace = "a.b" },
			[]string{`--leader-elect-resource-namespace "a.b" is not a valid namespace name`}},
		{"several at once", func(o *Options) { o.LeaseName = ""; o.LeaseDuration = 4 * time.Second },
			[]string{"--leader-elect-resource-name must not be empty", "--leader-elect-lease-duration (4s) must be greater than --leader-elect-renew-deadline (10s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.edit(&o)
			err := o.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil for %+v", o)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q\nwant it to contain %q", err, w)
				}
			}
			// Disabled options are not read, so not checked.
			o.Enabled = false
			if err := o.Validate(); err != nil {
				t.Errorf("disabled: Validate() = %v, want nil", err)
			}
		})
	}
}

// The timings the tests, the chaos tests and the bench pass on the command
// line (test/leader, test/webapp, test/chaos, hack/bench) are valid.
func TestValidateAcceptsShortTestDurations(t *testing.T) {
	for _, d := range [][3]time.Duration{
		{4 * time.Second, 2 * time.Second, 500 * time.Millisecond},
		{6 * time.Second, 4 * time.Second, 500 * time.Millisecond},
	} {
		o := DefaultOptions()
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = d[0], d[1], d[2]
		if err := o.Validate(); err != nil {
			t.Error(err)
		}
	}
}

func TestAddFlags(t *testing.T) {
	o := DefaultOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)

	defaults := map[string]string{
		"leader-elect":                    "true",
		"leader-elect-resource-name":      "handroll-leader",
		"leader-elect-resource-namespace": "",
		"leader-elect-lease-duration":     "15s",
		"leader-elect-renew-deadline":     "10s",
		"leader-elect-retry-period":       "2s",
		"leader-elect-warm-standby":       "true",
	}
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if len(names) != len(defaults) {
		t.Errorf("flags = %v, want exactly %d", names, len(defaults))
	}
	for name, def := range defaults {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("no flag --%s", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s default = %q, want %q", name, f.DefValue, def)
		}
	}
	if o != DefaultOptions() {
		t.Errorf("after AddFlags, options = %+v, want the defaults", o)
	}

	err := fs.Parse([]string{
		"--leader-elect=false", "--leader-elect-resource-name=other", "--leader-elect-resource-namespace=ops",
		"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=3s",
		"--leader-elect-warm-standby=false",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{LeaseName: "other", LeaseNamespace: "ops", LeaseDuration: 30 * time.Second,
		RenewDeadline: 20 * time.Second, RetryPeriod: 3 * time.Second, ReleaseOnCancel: true}
	if o != want {
		t.Errorf("parsed options = %+v, want %+v", o, want)
	}
}

func TestDefaultNamespace(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "namespace")
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "POD_NAMESPACE" {
				return v
			}
			return ""
		}
	}
	if got := defaultNamespace(file, env("")); got != FallbackNamespace {
		t.Errorf("no file, no env: %q, want %q", got, FallbackNamespace)
	}
	if got := defaultNamespace(file, env("from-env")); got != "from-env" {
		t.Errorf("env only: %q, want from-env", got)
	}
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := defaultNamespace(file, env("from-env")); got != "from-file" {
		t.Errorf("file and env: %q, want from-file", got)
	}
}

func TestNewIdentity(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	a, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewIdentity()
	re := regexp.MustCompile("^" + regexp.QuoteMeta(host) + "_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
	if !re.MatchString(a) {
		t.Errorf("NewIdentity() = %q, want hostname_uuid", a)
	}
	if a == b {
		t.Errorf("two identities are equal: %q", a)
	}
}
