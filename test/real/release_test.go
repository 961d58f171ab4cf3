package real

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// The repository a release of this tree is made for in the test: the
// local node pulls localhost/... from the local cluster's registry.
const releaseRepo = "localhost/handroll-release"

// TestReleaseIsSignedAndVerifiable makes a release as docs/releasing.md
// does, with a throw-away key, publishes it to the local cluster's
// registry, and checks it as docs/verify.md tells a user to: the image
// (each platform too), the chart's OCI artifact, the SBOM and provenance
// attestations and the signed files verify with the release's public key,
// and fail with another key or a changed byte. Then helm installs the
// chart from oci://, which runs the released image by its digest, to a
// Ready WebApp. cosign runs with every proxy variable pointing at a closed
// loopback port: anything it tried to reach beyond the local registry
// (a transparency log, sigstore's TUF repository) would fail the test
// rather than leave this machine.
func TestReleaseIsSignedAndVerifiable(t *testing.T) {
	helm, cosign := os.Getenv("HELM"), os.Getenv("COSIGN")
	if helm == "" || cosign == "" {
		t.Fatal("HELM or COSIGN is not set: run make test-real, which builds both")
	}
	if cluster.Node.Registry == "" {
		t.Fatal("the real node runs no registry (make cluster-down cluster-up REAL_NODE=true)")
	}
	// make release signs with no terminal to ask for the key's password, as
	// a release job does: the throw-away key has an empty one.
	t.Setenv("COSIGN_PASSWORD", "")
	dir := t.TempDir()
	c := &cosignRunner{bin: cosign, registry: cluster.Node.Registry, home: dir}
	key, pub := c.keyPair(t, "release")
	_, otherPub := c.keyPair(t, "other")
	dist := filepath.Join(dir, "dist")
	version := readVersion(t)

	t.Run("make release refuses a version cut from another tree", func(t *testing.T) {
		out, err := runMake("release", "VERSION=v0.1.0", "RELEASE_DIR="+filepath.Join(dir, "refused"))
		if err == nil || !strings.Contains(out, "v0.1.0 was cut at") {
			t.Errorf("make release VERSION=v0.1.0 at this tree: %v, want the refusal naming the cut:\n%s", err, out)
		}
	})

	made := makeTarget(t, "release", "RELEASE_DIR="+dist, "RELEASE_REPO="+releaseRepo, "COSIGN_KEY="+key, "RELEASE_ALLOW_DIRTY=true")
	if dev := strings.Contains(version, "-"); dev != strings.Contains(made, "is a development build") {
		t.Errorf("make release of %s says whether it is a development build wrongly:\n%s", version, firstLines(made, 5))
	}
	pushed := filepath.Join(cluster.Node.Registry, strings.TrimPrefix(releaseRepo, "localhost/"))
	out := makeTarget(t, "release-publish", "RELEASE_DIR="+dist, "RELEASE_REPO="+releaseRepo, "PUBLISH_REPO="+pushed,
		"COSIGN_KEY="+key, "REGISTRY_INSECURE=true")
	t.Logf("make release-publish:\n%s", lastLines(out, 8))

	digest := releasedDigest(t, dist)
	image := pushed + "@" + digest
	chartVersion := strings.TrimPrefix(version, "v")
	chart := filepath.Join(cluster.Node.Registry, "charts", "handroll") + "@" + manifestDigest(t, "charts/handroll", chartVersion)

	t.Run("the image, each platform and the chart verify with the release's key only", func(t *testing.T) {
		refs := append([]string{image, chart}, platformManifests(t, strings.TrimPrefix(pushed, cluster.Node.Registry+"/"), digest)...)
		for _, ref := range refs {
			c.mustPass(t, "verify", "--key", pub, ref)
			c.mustFail(t, "verify", "--key", otherPub, ref)
		}
	})
	t.Run("the SBOM and the provenance are attested to the image", func(t *testing.T) {
		for kind, predicateType := range map[string]string{"spdxjson": "https://spdx.dev/Document", "slsaprovenance1": "https://slsa.dev/provenance/v1"} {
			out := c.mustPass(t, "verify-attestation", "--key", pub, "--type", kind, image)
			checkStatement(t, out, predicateType, digest)
			c.mustFail(t, "verify-attestation", "--key", otherPub, "--type", kind, image)
		}
	})
	t.Run("install.yaml, the chart and SHA256SUMS verify as blobs, and not once changed", func(t *testing.T) {
		for _, name := range []string{"install.yaml", "handroll-" + chartVersion + ".tgz", "SHA256SUMS"} {
			file, bundle := filepath.Join(dist, name), filepath.Join(dist, name+".sigstore.json")
			c.mustPass(t, "verify-blob", "--key", pub, "--bundle", bundle, file)
			c.mustFail(t, "verify-blob", "--key", otherPub, "--bundle", bundle, file)
			c.mustFail(t, "verify-blob", "--key", pub, "--bundle", bundle, changedCopy(t, file))
		}
	})

	t.Run("helm install from oci:// runs the released image to a Ready WebApp", func(t *testing.T) {
		ns := realNamespace(t, "release-ops", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
		t.Cleanup(func() { cleanUpHelm(t, helm, ns) })
		runHelm(t, helm, "install", "handroll", "oci://"+filepath.Join(cluster.Node.Registry, "charts", "handroll"),
			"--version", chartVersion, "--plain-http", "-n", ns, "-f", writeNodeValues(t, ""))
		kubectl(t, "-n", ns, "rollout", "status", "deployment/handroll", "--timeout=180s")
		got := kubectl(t, "-n", ns, "get", "deployment/handroll", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
		if want := releaseRepo + "@" + digest; got != want {
			t.Errorf("the chart runs %s, want the released image %s", got, want)
		}
		apps := realNamespace(t, "release-apps", nil)
		eventually(t, "creating WebApp "+apps+"/shop", time.Minute, func(ctx context.Context) (bool, error) {
			_, err := handrollClient.HandrollV1().WebApps(apps).Create(ctx, &handrollv1.WebApp{
				ObjectMeta: metav1.ObjectMeta{Name: "shop"},
				Spec:       handrollv1.WebAppSpec{Image: demoImage, Replicas: ptr.To[int32](1)},
			}, metav1.CreateOptions{})
			return err == nil, err
		})
		kubectl(t, "-n", apps, "wait", "--for=condition=Ready", "webapp/shop", "--timeout=120s")
	})
}

// cosignRunner runs cosign as a user verifying a release does, against the
// local registry over plain HTTP, with nowhere else to go.
type cosignRunner struct{ bin, registry, home string }

func (c *cosignRunner) run(args ...string) (string, error) {
	switch args[0] {
	case "verify", "verify-attestation":
		args = append(args, "--allow-http-registry=true", "--allow-insecure-registry=true")
		fallthrough
	case "verify-blob":
		// Signed with a key and never logged: nothing to look up (docs/verify.md).
		args = append(args, "--insecure-ignore-tlog=true")
	}
	cmd := exec.Command(c.bin, args...)
	closed := "http://127.0.0.1:9"
	host, _, _ := strings.Cut(c.registry, ":")
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=", "HOME="+c.home, "TUF_ROOT="+filepath.Join(c.home, "tuf"),
		"HTTPS_PROXY="+closed, "HTTP_PROXY="+closed, "https_proxy="+closed, "http_proxy="+closed,
		"NO_PROXY="+host, "no_proxy="+host)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

func (c *cosignRunner) mustPass(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.run(args...)
	if err != nil {
		t.Fatalf("cosign %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("cosign %s: verified", strings.Join(args, " "))
	return out
}

func (c *cosignRunner) mustFail(t *testing.T, args ...string) {
	t.Helper()
	if out, err := c.run(args...); err == nil {
		t.Errorf("cosign %s passed, want a failure:\n%s", strings.Join(args, " "), out)
	}
}

// keyPair makes a throw-away key pair, with an empty password, and returns
// the paths of its private and public keys.
func (c *cosignRunner) keyPair(t *testing.T, name string) (string, string) {
	t.Helper()
	prefix := filepath.Join(c.home, name)
	if out, err := c.run("generate-key-pair", "--output-key-prefix", prefix); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	return prefix + ".key", prefix + ".pub"
}

func readVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// releasedDigest is the digest of the image the release's install.yaml
// runs.
func releasedDigest(t *testing.T, dist string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(regexp.QuoteMeta(releaseRepo) + `@(sha256:[0-9a-f]{64})`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("install.yaml runs no %s@sha256:...", releaseRepo)
	}
	return string(m[1])
}

const ociIndex = "application/vnd.oci.image.index.v1+json"

// registryGet reads a manifest from the local registry: its headers and
// its body.
func registryGet(t *testing.T, repo, ref string) (http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+cluster.Node.Registry+"/v2/"+repo+"/manifests/"+ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", ociIndex+", application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body bytes.Buffer
	if _, err := body.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s:%s from the registry: %s\n%s", repo, ref, resp.Status, body.String())
	}
	return resp.Header, body.Bytes()
}

func manifestDigest(t *testing.T, repo, ref string) string {
	t.Helper()
	header, _ := registryGet(t, repo, ref)
	return header.Get("Docker-Content-Digest")
}

// platformManifests names the image of each platform in the index.
func platformManifests(t *testing.T, repo, digest string) []string {
	t.Helper()
	_, body := registryGet(t, repo, digest)
	var index struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(body, &index); err != nil || len(index.Manifests) < 2 {
		t.Fatalf("the image index %s: %v, %d manifests; want one per platform", digest, err, len(index.Manifests))
	}
	var refs []string
	for _, m := range index.Manifests {
		refs = append(refs, cluster.Node.Registry+"/"+repo+"@"+m.Digest)
	}
	return refs
}

// checkStatement reads the in-toto statement of each attestation cosign
// printed and wants one of predicateType about the image digest.
func checkStatement(t *testing.T, out, predicateType, digest string) {
	t.Helper()
	for line := range strings.Lines(out) {
		var envelope struct {
			Payload string `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &envelope) != nil || envelope.Payload == "" {
			continue
		}
		payload, err := base64.StdEncoding.DecodeString(envelope.Payload)
		if err != nil {
			t.Fatal(err)
		}
		var statement struct {
			PredicateType string `json:"predicateType"`
			Subject       []struct {
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
		}
		if err := json.Unmarshal(payload, &statement); err != nil {
			t.Fatal(err)
		}
		if statement.PredicateType == predicateType && len(statement.Subject) == 1 &&
			"sha256:"+statement.Subject[0].Digest["sha256"] == digest {
			return
		}
	}
	t.Errorf("no verified attestation of type %s about %s in:\n%s", predicateType, digest, firstLines(out, 5))
}

// changedCopy copies file with one byte changed.
func changedCopy(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	out := filepath.Join(t.TempDir(), filepath.Base(file))
	if err := os.WriteFile(out, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}
