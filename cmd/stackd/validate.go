package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/policy"
)

// validate checks config files and directories like a compiler: one line
// per problem or note, exit code 1 when there is a problem.
func validate(args []string, stdout io.Writer) error {
	fs := newFlagSet("validate")
	quiet := fs.Bool("quiet", false, "print errors only, not notes about ignored Kubernetes kinds and fields")
	policyDir := fs.String("policy", "", "also check the Rego policies of this `directory`")
	var maxConfig byteSize
	defineMaxConfig(fs, &maxConfig)
	// The daemon's paths, which no config may name as a backend: the
	// same flags (and STACKD_* variables) as stackd run's.
	var daemonPaths runFlags
	fs.StringVar(&daemonPaths.dataDir, "data-dir", defaultDataDir, "the daemon's data dir, which no backend may lie in or above")
	fs.StringVar(&daemonPaths.secretsDir, "secrets-dir", "", "the daemon's --secrets-dir, which no backend may lie in or above")
	fs.StringVar(&daemonPaths.configMapsDir, "configmaps-dir", "", "the daemon's --configmaps-dir, which no backend may lie in or above")
	if err := parseFlags(fs, "validate [--quiet] [--max-config-bytes SIZE] [--policy DIR] [--data-dir DIR] PATH...", args, stdout); err != nil {
		return err
	}
	if fs.NArg() == 0 && *policyDir == "" {
		return usageErrorf("validate: name at least one config file or directory, or --policy DIR")
	}
	policiesOK := true
	if *policyDir != "" {
		policiesOK = validatePolicies(*policyDir, stdout)
	}
	if fs.NArg() == 0 {
		if !policiesOK {
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
	cfg, diags, err := spec.LoadInputs(localInputs(srcs, hosts))
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
	fmt.Fprintf(stdout, "ok: %d stack(s), %d program(s)\n", len(cfg.Stacks), len(cfg.Programs))
	if !policiesOK {
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
