package runner

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// liveSet holds the pids of the CLI processes a Command started and has
// not waited for yet.
type liveSet struct {
	mu   sync.Mutex
	pids map[int]bool
}

// start starts cmd and records its pid, under the lock the reaper takes,
// so that the reaper never sees the process unrecorded.
func (l *liveSet) start(cmd *exec.Cmd) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	if l.pids == nil {
		l.pids = map[int]bool{}
	}
	l.pids[cmd.Process.Pid] = true
	return nil
}

func (l *liveSet) done(pid int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pids, pid)
}

// reapPeriod is how often an orphan reaper looks for ended orphans.
var reapPeriod = time.Second

// reapOrphans, for a stackd to which orphaned processes are reparented
// (PID 1 in a container without an init, or a child subreaper), waits
// for every one that ended: nothing else would, so they would pile up as
// zombies. The pulumi plugins their CLI left behind are the usual ones,
// but any process a program started and left counts, whatever its name.
// It never takes a process some part of stackd waits for: the CLIs of
// the live set, and the children stackd starts in its own process group
// outside the runner (go-git's git-upload-pack for file:// repositories).
// It runs until ctx ends; elsewhere it returns at once.
func (c *Command) reapOrphans(ctx context.Context) {
	if !orphansComeHere() {
		return
	}
	t := time.NewTicker(reapPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.reapEnded()
	}
}

// reapEnded waits for the ended orphans. It holds the live set's lock, as
// every wait for a process other than one's own child does here
// (reapGroup), so no pid it found can be reaped by another and reused
// before it waits.
func (c *Command) reapEnded() {
	c.live.mu.Lock()
	defer c.live.mu.Unlock()
	for _, pid := range endedOrphans(os.Getpid(), syscall.Getpgrp()) {
		if !c.live.pids[pid] {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// endedOrphans lists the zombie children of process me that are not in
// process group pgrp: the children stackd starts itself outside the
// runner stay in its group, and whoever started them waits for them.
func endedOrphans(me, pgrp int) []int {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		st, ok := parseStat(string(data))
		if !ok || st.state != "Z" || st.ppid != me || st.pgrp == pgrp {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// procStat is what endedOrphans reads of /proc/<pid>/stat.
type procStat struct {
	state      string
	ppid, pgrp int
}

// parseStat reads the state, parent and process group of a
// /proc/<pid>/stat line: "pid (comm) state ppid pgrp …", where comm may
// hold spaces and parentheses.
func parseStat(s string) (procStat, bool) {
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 3 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{state: f[0], ppid: ppid, pgrp: pgrp}, true
}
