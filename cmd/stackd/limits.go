package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/gitwatch"
)

// limitFlags bound what a Git repository can make stackd hold in memory
// and write into the data dir.
type limitFlags struct {
	maxCheckout byteSize
	maxFile     byteSize
}

func (f *limitFlags) define(fs *flag.FlagSet) {
	f.maxCheckout = byteSize(gitwatch.DefaultMaxCheckoutBytes)
	f.maxFile = byteSize(gitwatch.DefaultMaxFileBytes)
	fs.Var(&f.maxCheckout, "max-checkout-bytes", "`size` the files of one Git checkout may have together, and its fetched pack (e.g. 512MiB; 0: no limit)")
	fs.Var(&f.maxFile, "max-file-bytes", "`size` one file of a Git checkout may have, and each object of its fetched pack; bounds a fetch's memory (e.g. 64MiB; 0: no limit)")
}

// withLimits returns o with the checkout limits set.
func (f *limitFlags) withLimits(o gitwatch.Options) gitwatch.Options {
	o.MaxCheckoutBytes, o.MaxFileBytes = f.maxCheckout.limit(), f.maxFile.limit()
	return o
}

// defineMaxConfig defines --max-config-bytes into v.
func defineMaxConfig(fs *flag.FlagSet, v *byteSize) {
	*v = byteSize(spec.DefaultMaxSourceBytes)
	fs.Var(v, "max-config-bytes", "`size` the files of one config source may have together (e.g. 16MiB; 0: no limit)")
}

// localInputs are the local sources of srcs as the loader reads them,
// with the rules hosts on the paths of the host they may name.
func localInputs(srcs []spec.Source, hosts spec.HostPaths) []spec.Input {
	var out []spec.Input
	for _, s := range srcs {
		if s.Git == nil {
			out = append(out, spec.Input{Source: s.Path, Path: s.Path, MaxBytes: s.MaxBytes, HostPaths: hosts})
		}
	}
	return out
}

// byteSize is a flag of a number of bytes: an integer with an optional
// unit B, KiB, MiB or GiB (K, M, G, KB, MB and GB are taken as the same
// powers of 1024). 0 means no limit.
type byteSize int64

var unitShifts = map[string]uint{
	"": 0, "b": 0,
	"k": 10, "ki": 10, "kb": 10, "kib": 10,
	"m": 20, "mi": 20, "mb": 20, "mib": 20,
	"g": 30, "gi": 30, "gb": 30, "gib": 30,
}

var errByteSize = errors.New("want a number of bytes with an optional unit B, KiB, MiB or GiB, such as 512MiB")

func (b *byteSize) Set(s string) error {
	v := strings.ToLower(strings.TrimSpace(s))
	i := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		i = len(v)
	}
	n, err := strconv.ParseInt(v[:i], 10, 64)
	shift, ok := unitShifts[strings.TrimSpace(v[i:])]
	if err != nil || !ok {
		return errByteSize
	}
	if n > math.MaxInt64>>shift {
		return fmt.Errorf("%s is too large", s)
	}
	*b = byteSize(n << shift)
	return nil
}

// String writes b in the largest unit that divides it.
func (b *byteSize) String() string {
	if b == nil {
		return "0"
	}
	n := int64(*b)
	for _, u := range []struct {
		name  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// limit is b as the packages take a limit: 0 (no limit) becomes -1.
func (b byteSize) limit() int64 {
	if b == 0 {
		return -1
	}
	return int64(b)
}
