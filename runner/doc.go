// Package runner runs Pulumi operations for stackd. It is the only package
// that uses the Pulumi Automation API; each operation runs the pinned
// pulumi CLI in a sandboxed subprocess.
package runner
