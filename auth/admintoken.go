package auth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// EnsureAdminToken returns the break-glass admin token kept in path (the
// daemon's <data-dir>/api-token when no --api-token-file is given),
// creating the file first when it does not exist: a token of
// GenerateToken, mode 0600. The file appears whole or not at all, and an
// existing one is never replaced; created says this call made it. An
// empty file is an error rather than an open API.
func EnsureAdminToken(path string) (token string, created bool, err error) {
	token, err = ReadAdminToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return token, false, err
	}
	if token, _, err = GenerateToken(); err != nil {
		return "", false, err
	}
	if err := createFileAtomic(path, []byte(token+"\n")); errors.Is(err, fs.ErrExist) {
		token, err = ReadAdminToken(path) // another process made it first
		return token, false, err
	} else if err != nil {
		return "", false, err
	}
	return token, true, nil
}

// ReadAdminToken reads a token file, trimmed; an empty one is an error.
func ReadAdminToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("%s is empty: delete it to have a new token generated", path)
	}
	return token, nil
}
