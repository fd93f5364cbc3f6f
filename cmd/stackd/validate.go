package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/stackd/stackd/auth"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/policy"
)

// validate checks config files and directories like a compiler: one line
// per problem or note, exit code 1 when there is a problem.
func validate(args []string, stdout io.Writer) error {
	fs := newFlagSet("validate")
	quiet := fs.Bool("quiet", false, "print errors only, not notes about ignored Kubernetes kinds and fields")
	policyDir := fs.String("policy", "", "also check the Rego policies of this `directory`")
	authFile := fs.String("auth-file", "", "also check this roles `file`, as stackd run --auth-file reads it")
	var maxConfig byteSize
	defineMaxConfig(fs, &maxConfig)
	// The daemon's paths, which no config may name as a backend: the
	// same flags (and STACKD_* variables) as stackd run's.
	var daemonPaths runFlags
	fs.StringVar(&daemonPaths.dataDir, "data-dir", defaultDataDir, "the daemon's data dir, which no backend may lie in or above")
	fs.StringVar(&daemonPaths.secretsDir, "secrets-dir", "", "the daemon's --secrets-dir, which no backend may lie in or above")
	fs.StringVar(&daemonPaths.configMapsDir, "configmaps-dir", "", "the daemon's --configmaps-dir, which no backend may lie in or above")
	if err := parseFlags(fs, "validate [--quiet] [--max-config-bytes SIZE] [--policy DIR] [--auth-file FILE] [--data-dir DIR] [PATH...]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() == 0 && *policyDir == "" && *authFile == "" {
		return usageErrorf("validate: name at least one config file or directory, --policy DIR or --auth-file FILE")
	}
	othersOK := true
	if *policyDir != "" {
		othersOK = validatePolicies(*policyDir, stdout)
	}
	if *authFile != "" && !validateAuthFile(*authFile, stdout) {
		othersOK = false
	}
	if fs.NArg() == 0 {
		if !othersOK {
			return errProblemsFound
		}
		return nil
	}
	var srcs []spec.Source
	for _, p := range fs.Args() {
		srcs = append(srcs, spec.Source{Path: p, MaxBytes: maxConfig.limit()})
	}
	dataDir, err := filepath.Abs(daemonPaths.dataDir)
	if err != nil {
		return err
	}
	hosts, err := daemonPaths.hostPaths(srcs, dataDir)
	if err != nil {
		return err
	}
	cfg, diags, err := spec.LoadInputsExpanding(localInputs(srcs, hosts), offlineExpander(hosts))
	for _, d := range diags {
		if !d.Note || !*quiet {
			fmt.Fprintln(stdout, d)
		}
	}
	var cerr *spec.ConfigError
	if errors.As(err, &cerr) {
		fmt.Fprintf(stdout, "%d error(s)\n", len(cerr.Diags))
		return errProblemsFound
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ok: %d stack(s), %d program(s)", len(cfg.Stacks), len(cfg.Programs))
	if len(cfg.StackSets) > 0 {
		fmt.Fprintf(stdout, ", %d stack set(s) (git generators not read)", len(cfg.StackSets))
	}
	fmt.Fprintln(stdout)
	if !othersOK {
		return errProblemsFound
	}
	return nil
}

// validatePolicies compiles the policies of dir and prints their
// problems, one per line naming file:line:column, or a summary.
func validatePolicies(dir string, stdout io.Writer) bool {
	set, err := policy.Load(context.Background(), dir, "")
	if err != nil {
		lines := strings.Split(err.Error(), "\n")
		for _, l := range lines {
			fmt.Fprintln(stdout, l)
		}
		fmt.Fprintf(stdout, "%d policy error(s)\n", len(lines))
		return false
	}
	fmt.Fprintf(stdout, "ok: %d policy file(s), policies %s\n", len(set.Files), strings.Join(set.Names(), ", "))
	return true
}

// validateAuthFile checks the roles file at path as stackd run
// --auth-file loads it and prints its problems, one per line naming
// file:line:column and the field, or a summary.
func validateAuthFile(path string, stdout io.Writer) bool {
	pol, err := auth.Load(path)
	var perr *auth.PolicyError
	switch {
	case errors.As(err, &perr):
		for _, d := range perr.Diags {
			fmt.Fprintln(stdout, d)
		}
		fmt.Fprintf(stdout, "%d roles file error(s)\n", len(perr.Diags))
		return false
	case err != nil:
		fmt.Fprintln(stdout, err)
		return false
	}
	fmt.Fprintf(stdout, "ok: roles file %s: %s\n", path, pol.Summary())
	return true
}
