package daemon

import (
	"errors"
	"io"
)

// Backuper is a Store that writes a consistent copy of itself while the
// daemon runs (the BoltDB store).
type Backuper interface {
	Backup(w io.Writer) (int64, error)
}

// ErrNoBackup is returned by Backup for a store that cannot write itself
// out: in a cluster, the state is etcd's, backed up with etcd's tools.
var ErrNoBackup = errors.New("this daemon's state cannot be backed up through stackd; in a cluster, back up etcd (etcdctl snapshot save)")

// Backup writes a consistent copy of the state to w, from one read
// transaction, while the daemon goes on.
func (d *Daemon) Backup(w io.Writer) (int64, error) {
	var st any = d.opts.Store
	if s, ok := st.(scrubStore); ok {
		st = s.storeRest
	}
	b, ok := st.(Backuper)
	if !ok {
		return 0, ErrNoBackup
	}
	return b.Backup(w)
}

// Pause stops operations from starting, so that an operator can copy the
// backend with nothing running; operations in flight finish, polls go
// on, and requests wait for Resume. It returns how many operations still
// run. A restart resumes.
func (d *Daemon) Pause() int {
	l := d.lock()
	defer l.unlock()
	if !l.paused {
		l.paused = true
		l.log.Warn("paused: no operation starts until resumed")
	}
	return l.running
}

// Resume lets operations start again.
func (d *Daemon) Resume() {
	l := d.lock()
	defer l.unlock()
	if l.paused {
		l.paused = false
		l.log.Info("resumed")
		l.fullPass = true
		l.kick()
	}
}
