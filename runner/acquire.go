package runner

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/stackd/stackd/daemon/model"
)

// The engine downloads no plugin itself (PULUMI_DISABLE_AUTOMATIC_PLUGIN_
// ACQUISITION): it would run, beside itself, what it downloaded, from a
// server the program may name (see engine.go). When an operation fails
// for a plugin it lacks, the runner runs `pulumi plugin install`, which
// installs the plugins the project needs (its language host says which,
// and from where) and runs none of them, then the same for the plugin
// the error names, when the first did not bring it; then it runs the
// operation again. What they installed is moved to the stack's downloads
// and mirrored behind the wrapper before any process starts it (see
// mirrorPlugins).

// maxAcquired bounds the plugins installed for one operation: each
// retry may find the next one missing.
const maxAcquired = 8

// missingPlugin matches the engine's error for a plugin that is not
// installed: its kind, name, version (optional) and server (optional).
var missingPlugin = regexp.MustCompile(`no (resource|language|analyzer|converter|tool) plugin 'pulumi-[a-z]+-([^' ]+)' found in the workspace(?: at version v([0-9A-Za-z.+-]+))?(?: or on your \$PATH)?(?: from (\S+?))?(?:["'\s,;]|$)`)

// plugin is a plugin to install.
type plugin struct{ kind, name, version, server string }

// missingIn is the plugin err says the engine lacks.
func missingIn(err error) (plugin, bool) {
	var e *Error
	if !errors.As(err, &e) {
		return plugin{}, false
	}
	m := missingPlugin.FindStringSubmatch(e.Message)
	if m == nil {
		return plugin{}, false
	}
	return plugin{kind: m[1], name: m[2], version: m[3], server: m[4]}, true
}

// operateAcquiring is operate, installing the plugins the operation
// fails for (see above) and running it again, up to maxAcquired times.
func (r *Runner) operateAcquiring(ctx context.Context, w *workspace, op model.Operation) (model.Result, error) {
	res, err := r.operate(ctx, w, op)
	tried := map[plugin]int{}
	for range maxAcquired {
		p, ok := missingIn(err)
		if !ok || tried[p] == 2 {
			return res, err
		}
		tried[p]++
		if ierr := r.install(ctx, w, p, tried[p] == 1); ierr != nil {
			return res, fmt.Errorf("%w (installing it: %w)", err, ierr)
		}
		res, err = r.operate(ctx, w, op)
	}
	return res, err
}

// install installs the project's plugins (project) or p into w's
// PULUMI_HOME, then mirrors them from its downloads.
func (r *Runner) install(ctx context.Context, w *workspace, p plugin, project bool) error {
	args := []string{"plugin", "install"}
	what := "install the project's plugins"
	if !project {
		what = "install the " + p.kind + " plugin " + p.name
		args = append(args, p.kind, p.name)
		if p.version != "" {
			args = append(args, p.version)
		}
		if p.server != "" {
			args = append(args, "--server", p.server)
		}
	}
	if _, err := r.pulumi(ctx, w, call{what: what}, args...); err != nil {
		return err
	}
	r.log.Info("installed plugins for the stack", "stack", w.Name, "plugin", p.name, "version", p.version, "project", project)
	return r.mkdirs(w)
}
