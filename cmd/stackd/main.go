// Command stackd is a GitOps daemon for Pulumi: it keeps the stacks named
// in its config in line with the Git repositories they track.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	// Change windows name IANA time zones: the binary carries the zone
	// database, for hosts and images that have none.
	_ "time/tzdata"
)

// version is set by the Makefile from git.
var version = "dev"

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and failed, or found problems
	exitUsage = 2 // the command line was wrong
	exitWaits = 3 // the request was taken, but waits (a sync in closed change windows)
)

const usageText = `stackd is a GitOps daemon for Pulumi.

Usage:
  stackd run [flags]                       run the daemon
  stackd validate PATH...                  check config files and directories
  stackd store check --data-dir DIR        check the state file's consistency
  stackd store migrate --to-etcd URLS      copy a stopped node's state into a cluster
  stackd backup --data-dir DIR FILE        write a consistent copy of the state file
  stackd backup --server URL FILE          the same, from a running daemon
  stackd status [NAME] [--json]            show the stacks of a running daemon
  stackd sync NAME                         ask a running daemon to run a stack
  stackd reload [--allow-removal N]        read the config again (N: remove up to N stacks, once)
  stackd approve NAME [--plan ID]          apply the plan that awaits approval
  stackd reject NAME [--reason TEXT]       refuse the plan that awaits approval
  stackd logs NAME [--update ID | --type T] [--follow]  print an update's log (default: the running or last operation)
  stackd diff NAME [--last]                preview what a sync would change at the latest commit
  stackd describe NAME                     one stack: conditions, commits, drift, outputs, resources
  stackd previews [--json]                 list open pull requests and their previews
  stackd rollout list|status SET [--json]  show the stack sets and their rollouts
  stackd rollout resume|abort SET          let a halted rollout go on, or stop it
  stackd pause [--wait D] / stackd resume  stop operations from starting (to copy the backend)
  stackd audit [--stack S] [--since D]     show who synced, paused, reloaded or was refused
  stackd oidc rotate [--emergency]         a new key to sign the stacks' cloud tokens, now
  stackd login --server URL                sign in through the browser, for the commands above
  stackd logout --server URL               forget that sign-in
  stackd version                           print the version

Every flag may also be given as an environment variable STACKD_<FLAG>,
e.g. STACKD_DATA_DIR for --data-dir. Run "stackd COMMAND -h" for a
command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a command line and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		err = runDaemon(ctx, rest, stderr)
	case "validate":
		err = validate(rest, stdout)
	case "store":
		err = storeCommand(rest, stdout)
	case "backup":
		err = backup(rest, stdout)
	case "status":
		err = statusCommand(rest, stdout)
	case "sync":
		err = syncCommand(rest, stdout)
	case "reload":
		err = reloadCommand(rest, stdout)
	case "approve", "reject":
		err = decideCommand(cmd, rest, stdout)
	case "logs":
		err = logsCommand(rest, stdout)
	case "diff":
		err = diffCommand(rest, stdout)
	case "describe":
		err = describeCommand(rest, stdout)
	case "previews":
		err = previewsCommand(rest, stdout)
	case "rollout":
		err = rolloutCommand(rest, stdout)
	case "pause", "resume":
		err = pauseCommand(cmd, rest, stdout)
	case "audit":
		err = auditCommand(rest, stdout)
	case "login":
		err = loginCommand(ctx, rest, stdout)
	case "oidc":
		err = oidcCommand(rest, stdout)
	case "logout":
		err = logoutCommand(rest, stdout)
	case "version", "--version":
		fmt.Fprintf(stdout, "stackd %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText)
	default:
		err = usageErrorf("unknown command %q", cmd)
	}
	return exitCode(err, stderr)
}

// usageError is a wrong command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// waitsError ends a command whose request was taken but waits: exit
// code 3.
type waitsError struct{ msg string }

func (e *waitsError) Error() string { return e.msg }

// errProblemsFound ends a command that already printed what it found.
var errProblemsFound = errors.New("problems found")

func exitCode(err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "stackd: %v\n(run \"stackd help\" for usage)\n", err)
		return exitUsage
	case errors.Is(err, errProblemsFound):
		return exitFail
	case errors.As(err, new(*waitsError)):
		fmt.Fprintf(stderr, "stackd: %v\n", err)
		return exitWaits
	default:
		fmt.Fprintf(stderr, "stackd: %v\n", err)
		return exitFail
	}
}
