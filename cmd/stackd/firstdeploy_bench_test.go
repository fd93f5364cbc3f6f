package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkE2EFirstDeploy200: the first deploy of 200 stacks (10
// repositories of one program, a test-provider File each) from the
// daemon's start to the last stack Ready, at the daemon's default
// concurrency, against the bare CLI creating and deploying the same 200
// stacks (`stack init`, the config file written, `up`), as many at once
// as there are cores. Goal: at most 1.2.
//
//	go test -run '^$' -bench FirstDeploy -benchtime 1x ./cmd/stackd/
func BenchmarkE2EFirstDeploy200(b *testing.B) { benchFirstDeploy(b, 200) }

func benchFirstDeploy(b *testing.B, n int) {
	bin := toolchainBin(b)
	const repos = 10
	var rs []*repo
	for range repos {
		r := newRepo(b)
		r.commit(map[string]string{"Pulumi.yaml": program("v1")})
		rs = append(rs, r)
	}
	out := outDir(b)
	var sb strings.Builder
	sb.WriteString("stacks:\n")
	for i := range n {
		sb.WriteString(stackYAML(fmt.Sprintf("s%03d", i), rs[i%repos], pathConfig(filepath.Join(out, fmt.Sprintf("s%03d.txt", i)))))
	}
	bare := bareFirstDeploy(b, bin, n)
	var daemon time.Duration
	for range b.N {
		start := time.Now()
		in := startDaemonWith(b, sb.String(), "", func(f *runFlags) { f.maxConcurrent = defaultConcurrency() })
		for i := range n {
			in.waitStackEvery(fmt.Sprintf("s%03d", i), 30*time.Minute, 20*time.Millisecond, isReady)
		}
		daemon += time.Since(start)
		in.stop()
	}
	perDaemon := daemon / time.Duration(b.N)
	b.ReportMetric(perDaemon.Seconds(), "daemon-s")
	b.ReportMetric(bare.Seconds(), "bare-s")
	b.ReportMetric(perDaemon.Seconds()/bare.Seconds(), "ratio")
	b.ReportMetric(float64(defaultConcurrency()), "concurrency")
}

// bareFirstDeploy creates and deploys n stacks of one project with the
// bare CLI, NumCPU at once, and returns the wall time.
func bareFirstDeploy(b *testing.B, bin string, n int) time.Duration {
	dir := b.TempDir()
	project, state := filepath.Join(dir, "project"), filepath.Join(dir, "state")
	for _, d := range []string{project, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(project, "Pulumi.yaml"), []byte(program("v1")), 0o600); err != nil {
		b.Fatal(err)
	}
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir, "PULUMI_HOME=" + filepath.Join(dir, "home"),
		"PULUMI_BACKEND_URL=file://" + state, "PULUMI_CONFIG_PASSPHRASE=bench", "PULUMI_SKIP_UPDATE_CHECK=true"}
	pulumi := func(args ...string) error {
		cmd := exec.Command(filepath.Join(bin, "pulumi"), append(args, "--non-interactive")...)
		cmd.Dir, cmd.Env = project, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("pulumi %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for range runtime.NumCPU() {
		wg.Go(func() {
			for i := range work {
				stack := fmt.Sprintf("b%03d", i)
				conf := fmt.Sprintf("config:\n  e2e:path: %s\n", filepath.Join(dir, stack+".txt"))
				if err := pulumi("stack", "init", stack); err != nil {
					errs <- err
					continue
				}
				if err := os.WriteFile(filepath.Join(project, "Pulumi."+stack+".yaml"), []byte(conf), 0o600); err != nil {
					errs <- err
					continue
				}
				errs <- pulumi("up", "--yes", "--skip-preview", "--stack", stack)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return took
}
