package main

import (
	"os"
	"strings"
	"testing"
)

const digest = "sha256:cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"

func TestParseImage(t *testing.T) {
	for in, want := range map[string]imageRef{
		"handroll":                             {name: "handroll"},
		"localhost/handroll:dev":               {name: "localhost/handroll", tag: "dev"},
		"registry.example:5000/team/handroll":  {name: "registry.example:5000/team/handroll"},
		"registry.example:5000/a/b:v1.2":       {name: "registry.example:5000/a/b", tag: "v1.2"},
		"registry.example/handroll@" + digest:  {name: "registry.example/handroll", digest: digest},
		"reg:5000/handroll:v1@" + digest:       {name: "reg:5000/handroll", tag: "v1", digest: digest},
		"reg.example/some_team/hand-roll__x:1": {name: "reg.example/some_team/hand-roll__x", tag: "1"},
	} {
		if got, err := parseImage(in); err != nil || got != want {
			t.Errorf("parseImage(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"x@sha256:short":         "64 hex digits",
		"x@sha512:" + digest[7:]: "64 hex digits",
		"x:":                     "is not a tag",
		"x:a b":                  "is not a tag",
		"Handroll":               "is not an image name",
		"":                       "is not an image name",
		"reg/handroll:v1 # x":    "is not a tag",
		"reg/handroll\n":         "is not an image name",
	} {
		if _, err := parseImage(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("parseImage(%q): %v; want an error saying %q", in, err, msg)
		}
	}
}

// TestChartImageCommittedValues sets each form of image in the chart's own
// values.yaml: only the lines of the values set change.
func TestChartImageCommittedValues(t *testing.T) {
	values, err := os.ReadFile("../../charts/handroll/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := string(values)
	for img, lines := range map[string][]string{
		"registry.invalid:5000/team/handroll@" + digest: {"    repository: registry.invalid:5000/team/handroll", `    digest: "` + digest + `"`},
		"example.invalid/handroll:v9":                   {"    repository: example.invalid/handroll", `    tag: "v9"`},
		"localhost/handroll:1.0":                        {"    repository: localhost/handroll", `    tag: "1.0"`},
		"ghcr.io/handroll/handroll":                     {"    repository: ghcr.io/handroll/handroll", "    repository: ghcr.io/handroll/handroll"},
		"ghcr.io/handroll/handroll:v1.2.3@" + digest:    {"    repository: ghcr.io/handroll/handroll", `    tag: "v1.2.3"`, `    digest: "` + digest + `"`},
	} {
		want := strings.Replace(src, "    repository: ghcr.io/handroll/handroll\n", lines[0]+"\n", 1)
		for _, line := range lines[1:] {
			switch {
			case strings.Contains(line, "tag:"):
				want = strings.Replace(want, "    tag: \"\"\n", line+"\n", 1)
			case strings.Contains(line, "digest:"):
				want = strings.Replace(want, "    digest: \"\"\n", line+"\n", 1)
			}
		}
		if got := chartImage(t, src, img); got != want {
			t.Errorf("%s: got\n%s\nwant\n%s", img, got, want)
		}
	}
}

func chartImage(t *testing.T, values, img string) string {
	t.Helper()
	ref, err := parseImage(img)
	if err != nil {
		t.Fatal(err)
	}
	out, err := setChartImage([]byte(values), ref)
	if err != nil {
		t.Fatalf("%s: %v", img, err)
	}
	return string(out)
}

func TestChartImageOddValues(t *testing.T) {
	for _, tc := range []struct {
		name, img, in, want string
	}{{
		name: "reordered, commented, trailing comments",
		img:  "reg.example/handroll@" + digest,
		in: "# top\nmanager:\n  image:\n    # pin it\n    digest: \"\" # none yet\n    pullPolicy: \"\"\n" +
			"    tag: v1 # old\n    # where from\n    repository: handroll   # the default\n  replicas: 2\n",
		want: "# top\nmanager:\n  image:\n    # pin it\n    digest: \"" + digest + "\" # none yet\n    pullPolicy: \"\"\n" +
			"    tag: \"\" # old\n    # where from\n    repository: reg.example/handroll   # the default\n  replicas: 2\n",
	}, {
		// The digest wins over the tag: one left from before would run
		// another image than IMG names.
		name: "a digest left in values, IMG with a tag",
		img:  "reg.example/handroll:v2",
		in:   "manager:\n  image:\n    repository: handroll\n    tag: \"\"\n    digest: \"" + digest + "\"\n",
		want: "manager:\n  image:\n    repository: reg.example/handroll\n    tag: \"v2\"\n    digest: \"\"\n",
	}, {
		name: "CRLF",
		img:  "reg.example/handroll:v2",
		in:   "manager:\r\n  image:\r\n    repository: handroll\r\n    tag: \"\"\r\n    digest: \"\"\r\n",
		want: "manager:\r\n  image:\r\n    repository: reg.example/handroll\r\n    tag: \"v2\"\r\n    digest: \"\"\r\n",
	}, {
		name: "flow mapping, single quotes",
		img:  "reg.example:5000/handroll:v2",
		in:   "manager: {image: {repository: handroll, tag: '', digest: ''}}\n",
		want: "manager: {image: {repository: reg.example:5000/handroll, tag: 'v2', digest: ''}}\n",
	}, {
		name: "a tag that reads as a number, empty values, no digest key",
		img:  "handroll:1.10",
		in:   "manager:\n  image:\n    repository:\n    tag: 1.0\n",
		want: "manager:\n  image:\n    repository: handroll\n    tag: \"1.10\"\n",
	}, {
		name: "text before the value that is not ASCII",
		img:  "reg.example/handroll:v2",
		in:   "manager:\n  image: {tag: \"é\", repository: handroll}\n",
		want: "manager:\n  image: {tag: \"v2\", repository: reg.example/handroll}\n",
	}, {
		name: "a value named null",
		img:  "null:v1",
		in:   "manager:\n  image:\n    \"repository\": handroll # é\n    tag: ~\n",
		want: "manager:\n  image:\n    \"repository\": \"null\" # é\n    tag: v1\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ref, err := parseImage(tc.img)
			if err != nil {
				t.Fatal(err)
			}
			out, err := setChartImage([]byte(tc.in), ref)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("got\n%q\nwant\n%q", out, tc.want)
			}
		})
	}
}

// TestChartImageRefused: values the helper cannot set without changing more
// than them are refused, the file left as it was.
func TestChartImageRefused(t *testing.T) {
	ref := imageRef{name: "reg.example/handroll", digest: digest}
	for in, msg := range map[string]string{
		"manager:\n  image:\n    repository: handroll\n":                                          "no digest to set",
		"manager:\n  image:\n    repository: &r handroll\n    digest: \"\"\nother: *r\n":          "an anchor or a tag",
		"manager:\n  image:\n    repository: !!str handroll\n    digest: \"\"\n":                  "an anchor or a tag",
		"manager:\n  image:\n    repository: |\n      handroll\n    digest: \"\"\n":               "a block scalar",
		"manager:\n  image:\n    repository: hand\n      roll\n    digest: \"\"\n":                "not the whole value",
		"manager:\n  image:\n    repository: \"hand\n      roll\"\n    digest: \"\"\n":            "not the whole value",
		"manager:\n  image:\n    repository: handroll\n    repository: other\n    digest: \"\"\n": "given twice",
		"manager:\n  image: handroll\n":                                                           "manager.image is not a mapping",
		"manager:\n  image:\n    repository: [handroll]\n    digest: \"\"\n":                      "not a scalar",
		"a: 1\n---\nb: 2\n": "want one YAML document",
	} {
		if _, err := setChartImage([]byte(in), ref); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v; want an error saying %q", in, err, msg)
		}
	}
}
