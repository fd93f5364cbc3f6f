package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/audit"
)

// defaultAuditRetention is how long audit entries are kept: 90 days.
const defaultAuditRetention = 90 * 24 * time.Hour

// auditPruneEvery is how often entries past the retention are deleted.
const auditPruneEvery = time.Hour

// auditFlags say how long the audit trail is kept.
type auditFlags struct {
	auditRetention retention
}

func (f *auditFlags) define(fs *flag.FlagSet) {
	f.auditRetention = retention(defaultAuditRetention)
	fs.Var(&f.auditRetention, "audit-retention", "how long audit entries are kept, a `duration` such as 90d or 720h (0: for ever); older ones are deleted hourly")
}

// pruneAudit starts deleting, at once and every hour, the entries of
// st's audit trail older than --audit-retention (nothing when st keeps no
// trail or the retention is 0). It returns closeStore preceded by the
// end of the pruning: a prune under way finishes before the store
// closes.
func (f *auditFlags) pruneAudit(st daemon.Store, closeStore func() error, log *slog.Logger) func() error {
	trail, ok := st.(audit.Log)
	keep := time.Duration(f.auditRetention)
	if !ok || keep == 0 {
		return closeStore
	}
	stop := startPruner(trail, keep, auditPruneEvery, time.Now, log.With("component", "audit"))
	return func() error {
		stop()
		return closeStore()
	}
}

// startPruner runs prune at once and then every period until the
// returned function is called, which waits for a prune under way.
func startPruner(trail audit.Log, keep, every time.Duration, now func() time.Time, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			pruneOnce(trail, keep, now(), log)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// pruneOnce deletes the entries older than keep at now, and logs how
// many.
func pruneOnce(trail audit.Log, keep time.Duration, now time.Time, log *slog.Logger) {
	before := now.Add(-keep)
	n, err := trail.PruneAudit(before)
	switch {
	case err != nil:
		log.Warn("cannot prune the audit trail; retrying in an hour", "err", err, "pruned", n)
	case n > 0:
		log.Info("pruned the audit trail", "entries", n, "older_than", before.UTC().Format(time.RFC3339), "retention", retention(keep).String())
	default:
		log.Debug("nothing to prune in the audit trail", "older_than", before.UTC().Format(time.RFC3339))
	}
}

// retention is a duration flag that also takes days ("90d"); not
// negative.
type retention time.Duration

func (r *retention) Set(s string) error {
	s = strings.TrimSpace(s)
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 32)
		if err != nil || n > 100*365 {
			return errors.New("want a number of days up to 36500 such as 90d, or a duration such as 720h")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return errors.New("want a duration such as 90d or 720h")
		}
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	*r = retention(d)
	return nil
}

func (r retention) String() string {
	d := time.Duration(r)
	if d != 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}
