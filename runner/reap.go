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

// reapPeriod is how often PID 1 looks for orphaned plugins to reap.
const reapPeriod = time.Second

// reapOrphans, for a stackd that runs as PID 1 (a container without an
// init), waits for the pulumi plugins that their CLI left behind: they
// become this process's children, and nothing else would reap them, so
// they would pile up as zombies. It takes only ended processes named
// pulumi-* that are not a CLI it still waits for, and runs until ctx
// ends. Elsewhere it returns at once.
func (c *Command) reapOrphans(ctx context.Context) {
	if os.Getpid() != 1 {
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
		c.live.mu.Lock()
		for _, pid := range endedPlugins() {
			if !c.live.pids[pid] {
				var ws syscall.WaitStatus
				_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			}
		}
		c.live.mu.Unlock()
	}
}

// endedPlugins lists the zombie children of this process whose command
// is pulumi or a pulumi-* plugin.
func endedPlugins() []int {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := os.Getpid()
	var out []int
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm := s[open+1 : end]
		fields := strings.Fields(s[end+1:]) // state, ppid, …
		if len(fields) < 2 || fields[0] != "Z" || !strings.HasPrefix(comm, "pulumi") {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid != me {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
