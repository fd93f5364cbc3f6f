//go:build tools

// Package tools pins the pulumi CLI's main package so that `go mod tidy`
// keeps every module it needs.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
