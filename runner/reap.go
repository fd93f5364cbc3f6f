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

// liveSet holds the pids of the CLI processes started and not waited for
// yet.
type liveSet struct {
	mu   sync.Mutex
	pids map[int]bool
}

// liveCLIs are the CLI processes the Commands of this process started
// and have not waited for yet. There is one set for the process, as
// orphans come to the process, not to a Command: no Command's reaper may
// take another's CLI.
var liveCLIs liveSet

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

// reapPeriod is how often an orphan reaper looks for orphans.
var reapPeriod = time.Second

// reapOrphans, for a stackd to which orphaned processes are reparented
// (PID 1 in a container without an init, or a child subreaper, as stackd
// run makes itself), kills and waits for every one that comes, whatever
// its name: stackd starts no process that outlives its parent, so an
// orphan is what a program's tree left behind, when the wrapper that
// would have killed it (see Reaper) was killed itself; nothing else
// would wait for it, so it would also pile up as a zombie. RunIn kills
// them at once when a CLI's wrapper did not report that it ended its
// tree; this catches the rest. It runs until ctx ends; elsewhere it
// returns at once.
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
		c.endOrphans()
	}
}

// endOrphans kills the orphans that came here, where orphans come here,
// and counts them with the Reaper.
func (c *Command) endOrphans() {
	if !orphansComeHere() {
		return
	}
	if n := killOrphans(); n > 0 && c.opts.Reaper != nil {
		c.opts.Reaper.Killed(n)
	}
}

// killing makes killOrphans run once at a time, so that it counts a
// process once.
var killing sync.Mutex

// killOrphans kills the orphans of this process, with the process groups
// they lead, and waits for them, until none is left: an orphan killed
// leaves its own children here. It gives up after a second (the
// reaper's next round goes on). It returns how many processes it found
// running; one that leads a process group counts for the group.
//
// It never takes a process some part of stackd waits for: the CLIs of
// liveCLIs, and the children stackd starts in its own process group
// outside the runner (go-git's git-upload-pack for file://
// repositories). No program's process can join that group: each CLI
// starts in a session of its own (procAttr).
func killOrphans() int {
	killing.Lock()
	defer killing.Unlock()
	signalled := map[int]bool{} // pids, and process groups as -pgid
	n := 0
	for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		if !killRound(signalled, &n) || time.Now().After(deadline) {
			return n
		}
	}
}

// killRound waits for the orphans that ended and kills those that run;
// false when it found none. It holds the live set's lock, as every wait
// here for a process not one's own child does, so no pid it found can
// be waited for by another and reused before it signals or waits.
func killRound(signalled map[int]bool, n *int) bool {
	liveCLIs.mu.Lock()
	defer liveCLIs.mu.Unlock()
	found := false
	for _, o := range orphans(os.Getpid(), syscall.Getpgrp()) {
		if liveCLIs.pids[o.pid] {
			continue
		}
		found = true
		if o.state == "Z" {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(o.pid, &ws, syscall.WNOHANG, nil)
			continue
		}
		if !signalled[o.pid] && !signalled[-o.pgrp] {
			*n++
		}
		_ = syscall.Kill(o.pid, syscall.SIGKILL)
		signalled[o.pid] = true
		if o.pgrp == o.pid {
			_ = syscall.Kill(-o.pid, syscall.SIGKILL)
			signalled[-o.pid] = true
		}
	}
	return found
}

// orphan is a child of this process, as /proc shows it.
type orphan struct {
	pid int
	procStat
}

// orphans lists the children of process me that are not in process
// group pgrp: the children stackd starts itself outside the runner stay
// in its group, and whoever started them waits for them.
func orphans(me, pgrp int) []orphan {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []orphan
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		st, ok := parseStat(string(data))
		if !ok || st.ppid != me || st.pgrp == pgrp {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			out = append(out, orphan{pid, st})
		}
	}
	return out
}

// procStat is what orphans reads of /proc/<pid>/stat.
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
