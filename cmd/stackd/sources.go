package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// sourceFlags are the flags of the config sources: where the config is
// read and how Git sources authenticate. Every credential is read from a
// file, never from argv.
type sourceFlags struct {
	config         stringsFlag
	pollInterval   time.Duration
	tokenFile      string
	username       string
	passwordFile   string
	sshKeyFile     string
	passphraseFile string
	maxConfig      byteSize
}

func (f *sourceFlags) define(fs *flag.FlagSet) {
	fs.Var(&f.config, "config", "config `source`: a file or directory of Stack specs, or a Git directory git+URL//PATH?ref=REF (repeatable; required)")
	fs.DurationVar(&f.pollInterval, "config-poll-interval", daemon.DefaultSourcePoll, "how often Git config sources are polled (a push webhook polls at once)")
	fs.StringVar(&f.tokenFile, "config-git-token-file", "", "file holding an access token for Git config sources (sent as the password of user git)")
	fs.StringVar(&f.username, "config-git-username", "", "user name for Git config sources, with --config-git-password-file")
	fs.StringVar(&f.passwordFile, "config-git-password-file", "", "file holding the password of --config-git-username")
	fs.StringVar(&f.sshKeyFile, "config-git-ssh-key-file", "", "file holding an SSH private key (PEM) for Git config sources")
	fs.StringVar(&f.passphraseFile, "config-git-ssh-passphrase-file", "", "file holding the passphrase of --config-git-ssh-key-file")
	defineMaxConfig(fs, &f.maxConfig)
}

// sources parses the --config values.
func (f *sourceFlags) sources() ([]spec.Source, error) {
	var out []spec.Source
	for _, v := range f.config {
		s, err := spec.ParseSource(v)
		if err != nil {
			return nil, usageErrorf("run: --config: %v", err)
		}
		s.MaxBytes = f.maxConfig.limit()
		out = append(out, s)
	}
	return out, nil
}

// auth reads the credentials of the Git sources; nil when none is given.
// One form at most: a token, a user and password, or an SSH key.
func (f *sourceFlags) auth() (*model.GitAuth, error) {
	forms := 0
	for _, set := range []bool{f.tokenFile != "", f.username != "" || f.passwordFile != "", f.sshKeyFile != ""} {
		if set {
			forms++
		}
	}
	switch {
	case forms > 1:
		return nil, usageErrorf("run: give one of --config-git-token-file, --config-git-username with --config-git-password-file, or --config-git-ssh-key-file")
	case f.passphraseFile != "" && f.sshKeyFile == "":
		return nil, usageErrorf("run: --config-git-ssh-passphrase-file needs --config-git-ssh-key-file")
	case (f.username == "") != (f.passwordFile == ""):
		return nil, usageErrorf("run: --config-git-username and --config-git-password-file go together")
	case forms == 0:
		return nil, nil
	case f.tokenFile != "":
		token, err := readSecretFile(f.tokenFile, "--config-git-token-file")
		return &model.GitAuth{Username: "git", Password: token}, err
	case f.username != "":
		pass, err := readSecretFile(f.passwordFile, "--config-git-password-file")
		return &model.GitAuth{Username: f.username, Password: pass}, err
	}
	key, err := os.ReadFile(f.sshKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--config-git-ssh-key-file: %w", err)
	}
	pass, err := readSecretFile(f.passphraseFile, "--config-git-ssh-passphrase-file")
	if err != nil {
		return nil, err
	}
	return &model.GitAuth{SSHPrivateKey: key, SSHPassphrase: pass}, nil
}

// localPaths are the sources that are local files or directories.
func localPaths(srcs []spec.Source) []string {
	var out []string
	for _, s := range srcs {
		if s.Git == nil {
			out = append(out, s.Path)
		}
	}
	return out
}
