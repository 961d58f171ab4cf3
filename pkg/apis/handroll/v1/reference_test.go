package v1_test

import (
	"strings"
	"testing"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

func TestValidateImageReference(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	valid := []string{
		"nginx",
		"nginx:1.27",
		"nginx:1.27.0-alpine",
		"library/nginx:latest",
		"example.com/team/app:v1",
		"example.com:5000/team/app:v1",
		"localhost/app",
		"localhost:5000/app:dev",
		"Example.COM/app",
		"[::1]:5000/app:v1",
		"app@" + digest,
		"example.com/app:v1@" + digest,
		"my_app/sub__path/a-b--c.d:TAG_1",
	}
	for _, ref := range valid {
		if err := handrollv1.ValidateImageReference(ref); err != nil {
			t.Errorf("%q: unexpected error: %v", ref, err)
		}
	}

	invalid := map[string]string{
		"":                                  "must not be empty",
		" nginx":                            "white space",
		"nginx latest":                      "white space",
		"nginx:":                            "tag",
		"nginx:-bad":                        "tag",
		"nginx:" + strings.Repeat("a", 129): "tag",
		"Nginx":                             "repository",
		"team/App":                          "repository",
		"nginx@sha256:abc":                  "digest",
		"nginx@":                            "digest",
		":v1":                               "must name a repository",
		"example.com/":                      "repository",
		"app/":                              "repository",
		"a//b":                              "repository",
		"-app":                              "repository",
		"ex_ample.com/app":                  "registry host",
	}
	for ref, want := range invalid {
		err := handrollv1.ValidateImageReference(ref)
		if err == nil {
			t.Errorf("%q: accepted, want an error about %s", ref, want)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %q does not mention %q", ref, err, want)
		}
	}
}
