package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// ErrLockHeld is returned by Unlock when a lock of the stack may belong to
// a running update: a live process of this host, or another host.
var ErrLockHeld = errors.New("the stack is locked by an update that may still run")

// lockInfo is a file backend's lock file:
// <backend>/.pulumi/locks/<org>/<project>/<stack>/<uuid>.json.
type lockInfo struct {
	Pid       int       `json:"pid"`
	Username  string    `json:"username"`
	Hostname  string    `json:"hostname"`
	Timestamp time.Time `json:"timestamp"`
}

// Unlock breaks the stack's locks on a file backend when every one of
// them was left by a process of this host that no longer runs (the
// daemon or the CLI was killed during an update). It does nothing on other
// backends, whose locks it cannot inspect, and returns an error wrapping
// ErrLockHeld when a lock may belong to a running update.
func (r *Runner) Unlock(ctx context.Context, ws model.Workspace) error {
	w, err := r.open(ws)
	if err != nil {
		return err
	}
	_, err = r.breakStaleLock(ctx, w)
	return err
}

// breakStaleLock runs `pulumi cancel` when w's stack has locks and all of
// them are stale; it reports whether it did.
func (r *Runner) breakStaleLock(ctx context.Context, w *workspace) (bool, error) {
	locks, err := w.locks()
	if err != nil || len(locks) == 0 {
		return false, err
	}
	for _, l := range locks {
		if l.Hostname != r.hostname || processRuns(l.Pid) {
			return false, fmt.Errorf("stack %s: %w: pid %d on host %s since %s",
				w.Name, ErrLockHeld, l.Pid, l.Hostname, l.Timestamp.Format(time.RFC3339))
		}
	}
	for _, l := range locks {
		r.log.Warn("breaking a stale lock of the stack", "stack", w.Name, "pid", l.Pid,
			"host", l.Hostname, "since", l.Timestamp)
	}
	return r.cancel(ctx, w)
}

// breakLock breaks w's lock whoever holds it, on any backend: the caller
// knows its holder is gone (a replica whose lease expired).
func (r *Runner) breakLock(ctx context.Context, w *workspace) (bool, error) {
	r.log.Warn("breaking the lock a stopped replica left on the stack", "stack", w.Name)
	return r.cancel(ctx, w)
}

// cancel runs `pulumi cancel`, which removes the stack's lock.
func (r *Runner) cancel(ctx context.Context, w *workspace) (bool, error) {
	if _, err := r.pulumi(ctx, w, call{what: "cancel the stale update"}, "cancel", "--yes", "--stack", w.Stack); err != nil {
		return false, fmt.Errorf("stack %s: %w", w.Name, err)
	}
	return true, nil
}

// locks reads the lock files of w's stack; none on a backend that is not
// a file backend.
func (w *workspace) locks() ([]lockInfo, error) {
	root, ok := fileBackendDir(w.state)
	if !ok {
		return nil, nil
	}
	org, project := w.orgProject("*")
	pattern := filepath.Join(root, ".pulumi", "locks", org, project, stackBase(w.Stack), "*.json")
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("stack %s: find lock files: %w", w.Name, err)
	}
	var locks []lockInfo
	for _, p := range paths {
		data, err := readRegular(p)
		if errors.Is(err, os.ErrNotExist) { // released meanwhile
			continue
		}
		var l lockInfo
		if err == nil {
			err = json.Unmarshal(data, &l)
		}
		if err != nil {
			return nil, fmt.Errorf("stack %s: read lock file %s: %w", w.Name, filepath.Base(p), err)
		}
		locks = append(locks, l)
	}
	return locks, nil
}

// orgProject are the organization and project of w's stack on a file
// backend: those of a fully qualified stack name, else org (a glob, or
// the backend's default "organization") and w's project.
func (w *workspace) orgProject(org string) (string, string) {
	if parts := strings.Split(w.Stack, "/"); len(parts) == 3 {
		return parts[0], parts[1]
	}
	return org, w.project
}

// fileBackendDir is the directory of a file:// backend URL ("~" is the
// home directory, a query is ignored).
func fileBackendDir(backend string) (string, bool) {
	rest, ok := strings.CutPrefix(backend, "file://")
	if !ok {
		return "", false
	}
	rest, _, _ = strings.Cut(rest, "?")
	if dir, ok := strings.CutPrefix(rest, "~"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", false
		}
		rest = home + dir
	}
	return filepath.Clean(rest), rest != ""
}

// processRuns tells whether pid may be the pulumi CLI that took a lock: a
// process with that pid exists, is not a zombie (a killed CLI whose parent
// died stays one until reaped, and may never be in a container without an
// init), and, when its name can be read, is pulumi. A pid reused by
// another program does not hold the lock.
func processRuns(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return true
	}
	comm := string(stat[bytes.IndexByte(stat, '(')+1 : i])
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X") {
		return false
	}
	return strings.Contains(comm, "pulumi")
}
