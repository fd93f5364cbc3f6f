package spec

import (
	"fmt"
	"strings"
)

// Pos is a place in a config file. Line and Col are 1-based; zero means
// unknown.
type Pos struct {
	File string
	Line int
	Col  int
}

// String formats p like a compiler: "file:line:col", "file:line" or "file".
func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Col == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	default:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	}
}

// Diagnostic is a problem found in a config, or with Note set, something
// that was parsed and ignored. Messages never quote config values other
// than names, so that a secret written in a config cannot leak through
// them.
type Diagnostic struct {
	Pos  Pos
	Path string // field path, e.g. "spec.branch" or "stacks[2].envRefs.TOKEN"
	Msg  string
	Note bool
}

// String formats d as one line: "FILE:LINE:COL: field.path: message".
func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.Pos.String())
	b.WriteString(": ")
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	if d.Note {
		b.WriteString("note: ")
	}
	b.WriteString(d.Msg)
	return b.String()
}

// Diagnostics is the list of problems and notes of a load, in file order.
type Diagnostics []Diagnostic

// Errors returns the diagnostics that are not notes.
func (ds Diagnostics) Errors() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if !d.Note {
			out = append(out, d)
		}
	}
	return out
}

// Notes returns the informational diagnostics.
func (ds Diagnostics) Notes() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Note {
			out = append(out, d)
		}
	}
	return out
}

// ConfigError is returned by Load when a config has errors. It carries
// every error found, not only the first: those found decoding (the
// causes, such as an unknown field) before those found validating the
// whole, each in file order.
type ConfigError struct {
	Diags Diagnostics
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Diags))
	for i, d := range e.Diags {
		lines[i] = d.String()
	}
	return "invalid config:\n" + strings.Join(lines, "\n")
}
