package main

import (
	"strings"
	"testing"

	"github.com/handroll/handroll/pkg/leader"
)

func TestValidateShards(t *testing.T) {
	for _, tc := range []struct {
		shards  int
		elect   bool
		wantErr string // "" for none
	}{
		{0, true, ""},
		{0, false, ""},
		{12, true, ""},
		{maxShards, true, ""},
		{-1, true, "--shards=-1"},
		{maxShards + 1, true, "--shards=1025"},
		{4, false, "needs --leader-elect"},
	} {
		o := options{shards: tc.shards, leader: leader.DefaultOptions()}
		o.leader.Enabled = tc.elect
		err := validateShards(o)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("--shards=%d, --leader-elect=%v: %v", tc.shards, tc.elect, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("--shards=%d, --leader-elect=%v: error %v, want one containing %q", tc.shards, tc.elect, err, tc.wantErr)
		}
	}
}
