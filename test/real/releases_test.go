package real

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/handroll/handroll/test/release"
)

// A releaseImage is a release upgraded from, checked out, with its image
// built by its own make image and pushed to the local cluster's registry.
type releaseImage struct {
	*release.Release
	image string // localhost/handroll:release-vX.Y.Z
}

var (
	releasesOnce sync.Once
	releases     []*releaseImage
	releasesErr  error
)

// upgradedFrom returns the releases an upgrade to this tree starts from
// (test/upgrade/supported: the latest before it, then the oldest
// supported), each checked out and its image pushed, once per run; TestMain
// removes the worktrees.
func upgradedFrom(t *testing.T) []*releaseImage {
	t.Helper()
	releasesOnce.Do(func() {
		var checkedOut []*release.Release
		checkedOut, releasesErr = release.CheckOutSupported(root, filepath.Join(root, "test", "upgrade", "supported"))
		for _, r := range checkedOut {
			releases = append(releases, &releaseImage{Release: r, image: "localhost/handroll:release-" + r.Ref})
		}
		for _, r := range releases {
			if releasesErr == nil {
				releasesErr = r.push()
			}
		}
	})
	if releasesErr != nil {
		t.Fatal(releasesErr)
	}
	return releases
}

// push builds the release's image with its own make image, for this
// machine's architecture only (the real node's), and pushes it.
func (r *releaseImage) push() error {
	cmd := exec.Command("make", "--no-print-directory", "-C", r.Dir, "image", "IMG="+r.image, "IMAGE_PLATFORMS=linux/"+goarch())
	cmd.Env = release.WithoutMakeFlags(withoutKubeconfig(os.Environ()))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make image in %s (%s): %w\n%s", r.Ref, r.Dir, err, out)
	}
	cmd = exec.Command("make", "--no-print-directory", "local-push", "IMG="+r.image,
		"PUSH_ARCHIVE="+filepath.Join(r.Dir, ".local", "image", "handroll.tar"))
	cmd.Dir = root
	cmd.Env = withoutKubeconfig(os.Environ())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make local-push of %s: %w\n%s", r.Ref, err, out)
	}
	return nil
}

// hasChart tells whether the release shipped a Helm chart.
func (r *releaseImage) hasChart() bool {
	_, err := os.Stat(filepath.Join(r.Dir, "charts", "handroll", "Chart.yaml"))
	return err == nil
}

// installer writes the release's install.yaml, with its image, as its own
// make build-installer writes it, and returns its path.
func installer(t *testing.T, tree, image string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "install.yaml")
	cmd := exec.Command("make", "--no-print-directory", "-C", tree, "build-installer", "IMG="+image, "INSTALLER="+out)
	cmd.Env = append(release.WithoutMakeFlags(withoutKubeconfig(os.Environ())), "KUBECTL="+kubectlPath(t))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build-installer in %s: %v\n%s", tree, err, b)
	}
	return out
}

func goarch() string {
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil || len(out) < 2 {
		return "amd64"
	}
	return string(out[:len(out)-1])
}

// removeReleases removes the worktrees upgradedFrom checked out.
func removeReleases() {
	for _, r := range releases {
		if err := r.Remove(); err != nil {
			fmt.Fprintf(os.Stderr, "test/real: %v\n", err)
		}
	}
}
