package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/stackd/stackd/store"
)

const defaultDataDir = ".data"

// storeCommand runs "stackd store SUBCOMMAND".
func storeCommand(args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "migrate" {
		return migrateCommand(args[1:], stdout)
	}
	if len(args) == 0 || args[0] != "check" {
		return usageErrorf("store: the subcommands are check and migrate")
	}
	fs := newFlagSet("store check")
	dataDir := fs.String("data-dir", defaultDataDir, "data directory holding "+store.FileName)
	if err := parseFlags(fs, "store check [--data-dir DIR]", args[1:], stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("store check: unexpected argument %q", fs.Arg(0))
	}
	s, err := openReadOnly(*dataDir)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		return fmt.Errorf("%s is damaged: %w", s.Path(), err)
	}
	version, err := s.SchemaVersion()
	if err != nil {
		return err
	}
	stacks, err := s.Stacks()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "ok: %s: schema version %d, %d stack(s)\n", s.Path(), version, len(stacks))
	return nil
}

// backup writes a consistent copy of the state file.
func backup(args []string, stdout io.Writer) error {
	fs := newFlagSet("backup")
	dataDir := fs.String("data-dir", defaultDataDir, "data directory holding "+store.FileName+" (with --server: holding the daemon's "+apiTokenFile+")")
	server := fs.String("server", "", "URL of a running daemon's HTTP API to back up through (instead of --data-dir)")
	tokenFile := fs.String("api-token-file", "", "file holding the API token (default: the daemon's "+apiTokenFile+" in --data-dir)")
	caFile := fs.String("ca-file", "", "PEM CA certificates that verify an https --server (default: the system's)")
	if err := parseFlags(fs, "backup [--data-dir DIR | --server URL] FILE", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("backup: name the file to write")
	}
	if *server != "" {
		return backupFromServer(&clientOpts{server: *server, tokenFile: *tokenFile, dataDir: *dataDir, caFile: *caFile}, fs.Arg(0), stdout)
	}
	s, err := openReadOnly(*dataDir)
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%w\nwhile stackd runs, back up through its API: stackd backup --server URL FILE", err)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	if err := store.BackupFile(s, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", fs.Arg(0))
	return nil
}

// backupFromServer writes the copy a running daemon streams to dst, and
// checks it before it replaces dst.
func backupFromServer(opts *clientOpts, dst string, stdout io.Writer) error {
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	resp, err := c.do(http.MethodGet, "/api/v1/backup")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	tmp := dst + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	n, err := io.Copy(f, resp.Body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = checkBackup(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s (%d bytes) from %s\n", dst, n, opts.server)
	return nil
}

// checkBackup opens a copy read-only and runs the store's check on it.
func checkBackup(path string) error {
	s, err := store.Open(path, store.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return fmt.Errorf("the copy does not open: %w", err)
	}
	defer s.Close()
	if err := s.Check(); err != nil {
		return fmt.Errorf("the copy is damaged: %w", err)
	}
	return nil
}

func openReadOnly(dataDir string) (*store.Store, error) {
	return store.Open(filepath.Join(dataDir, store.FileName), store.Options{ReadOnly: true, Timeout: 2 * time.Second})
}

// migrateCommand runs "stackd store migrate --to-etcd URLS": it copies a
// stopped single node's state into an empty cluster.
func migrateCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("store migrate")
	dataDir := fs.String("data-dir", defaultDataDir, "data directory holding "+store.FileName)
	var cf clusterFlags
	cf.defineEtcd(fs, "to-etcd", "etcd client `URLs` of the cluster, comma-separated")
	if err := parseFlags(fs, "store migrate --to-etcd URLS [--data-dir DIR] [flags]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("store migrate: unexpected argument %q", fs.Arg(0))
	}
	if cf.etcd == "" {
		return usageErrorf("store migrate: --to-etcd is required")
	}
	s, err := openReadOnly(*dataDir)
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%w\nstop stackd before migrating its state", err)
	}
	if err != nil {
		return err
	}
	defer s.Close()
	cf.node = "migrate"
	ctx := context.Background()
	c, err := cf.connect(ctx, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer c.Close()
	n, err := c.Import(ctx, s)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "imported %d stack(s), %d update(s), %d log(s), %d config revision(s), %d metadata value(s), %d audit entr(ies) into %s\n",
		n.Stacks, n.Updates, n.Logs, n.Revisions, n.Meta, n.Audit, cf.etcd)
	return nil
}
