package main

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A list whose continue token expired resumes with the token its 410
// carries; any other error, or an expiry without a token, ends the list.
func TestAnExpiredContinueResumes(t *testing.T) {
	expired := func(token string) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired,
			ListMeta: metav1.ListMeta{Continue: token}}}
	}
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"expired, with a token", expired("next"), "next"},
		{"expired, wrapped", fmt.Errorf("list: %w", expired("next")), "next"},
		{"expired, without a token", expired(""), ""},
		{"another status", apierrors.NewConflict(schema.GroupResource{Resource: "webapps"}, "a", errors.New("changed")), ""},
		{"not an API error", errors.New("connection refused"), ""},
		{"no error", nil, ""},
	} {
		if got := expiredContinue(c.err); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
