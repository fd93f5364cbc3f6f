package store

import (
	"testing"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/storetest"
)

// TestContract runs the daemon.Store contract that the etcd store runs
// too.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, limits storetest.Limits) (daemon.Store, func(string)) {
		return openTest(t, Options{HistoryLimit: limits.History, LogLimit: limits.Log}), func(string) {}
	})
}
