// Command pulumi-resource-stackdtest is a tiny Pulumi resource provider for
// stackd's tests. It serves the package "stackdtest" with one resource,
// stackdtest:index:File, a file on the local disk. Because Read looks at the
// disk, a hand edit of the file is real drift that `pulumi refresh` sees.
//
// stackdtest:index:Sleep is a resource whose create and update take the
// time its input duration says (and nothing else): operations that wait on
// I/O, for tests and benchmarks of concurrency.
//
// It also serves the function stackdtest:index:getEnv, which returns an
// environment variable of the provider process, so that a program can show
// what its stack's envRefs resolved to, and stackdtest:index:run, which runs
// a shell command in the provider process and returns its output, as
// pulumi-command's local:run does: the committed code of a program, run in
// every preview, for the tests of the program's sandbox.
//
// Two environment variables change its behaviour, for tests and the example:
//
//	STACKDTEST_ROOT   relative paths start there instead of the program's
//	                  directory
//	STACKDTEST_DELAY  a Go duration to sleep before each create, update and
//	                  delete, so that a test can interrupt an operation
//	STACKDTEST_DIFF_DELAY  a Go duration to sleep in each diff of a File
//	                  (a preview diffs, as an update does), so that a test
//	                  can interrupt a preview
//	STACKDTEST_HOLD   a directory of gates, so that a test holds an operation
//	                  open for as long as it needs (see hold)
//
// The CLI finds the binary on PATH (an "ambient" plugin); tools/toolchain.sh
// builds it into bin/.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

// Name and Version of the package the provider serves. Pulumi programs refer
// to the resource as stackdtest:index:File.
const (
	Name    = "stackdtest"
	Version = "0.1.0"
)

func main() {
	if err := p.RunProvider(context.Background(), Name, Version, provider()); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
		os.Exit(1)
	}
}

// provider is the inferred provider: its schema (GetSchema) and its CRUD
// calls are derived from the File type below.
func provider() p.Provider {
	return infer.Provider(infer.Options{
		Resources: []infer.InferredResource{infer.Resource(&File{}), infer.Resource(&Sleep{})},
		Functions: []infer.InferredFunction{infer.Function(&GetEnv{}), infer.Function(&Run{})},
	})
}

// File manages one file on the local disk. Its ID is the file's absolute
// path.
type File struct{}

// FileArgs are the inputs of a File.
type FileArgs struct {
	// Path is absolute, or relative to the provider's working directory,
	// which is the Pulumi program's directory. Changing it replaces the
	// resource.
	Path string `pulumi:"path" provider:"replaceOnChanges"`
	// Content is the whole content of the file.
	Content string `pulumi:"content"`
}

// FileState is the state (outputs) of a File: the same two fields. Path is
// kept as the program wrote it; the absolute path is the resource's ID.
type FileState struct {
	Path    string `pulumi:"path"`
	Content string `pulumi:"content"`
}

// Annotate describes the resource in the schema and gives it its token.
func (f *File) Annotate(a infer.Annotator) {
	a.Describe(&f, "A file on the local disk, for stackd's tests.")
	a.SetToken("index", "File")
}

// Annotate describes the inputs in the schema.
func (a *FileArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Path, "Path of the file: absolute, or relative to the program's directory. A change replaces the file.")
	an.Describe(&a.Content, "Content of the file.")
}

// Annotate describes the outputs in the schema.
func (s *FileState) Annotate(an infer.Annotator) {
	an.Describe(&s.Path, "Path of the file, as given.")
	an.Describe(&s.Content, "Content of the file, as last read or written.")
}

// Create writes the file, creating its parent directories.
func (*File) Create(ctx context.Context, req infer.CreateRequest[FileArgs]) (infer.CreateResponse[FileState], error) {
	abs, err := absPath(req.Inputs.Path)
	if err != nil {
		return infer.CreateResponse[FileState]{}, err
	}
	state := FileState(req.Inputs)
	if req.DryRun {
		return infer.CreateResponse[FileState]{ID: abs, Output: state}, nil
	}
	if err := step(ctx, "create", abs); err != nil {
		return infer.CreateResponse[FileState]{}, err
	}
	if err := write(abs, req.Inputs.Content); err != nil {
		return infer.CreateResponse[FileState]{}, err
	}
	return infer.CreateResponse[FileState]{ID: abs, Output: state}, nil
}

// Read returns what is on disk now. A missing file yields an empty ID, which
// tells Pulumi that the resource is gone.
func (*File) Read(ctx context.Context, req infer.ReadRequest[FileArgs, FileState]) (infer.ReadResponse[FileArgs, FileState], error) {
	data, err := os.ReadFile(req.ID)
	if errors.Is(err, fs.ErrNotExist) {
		return infer.ReadResponse[FileArgs, FileState]{}, nil
	}
	if err != nil {
		return infer.ReadResponse[FileArgs, FileState]{}, err
	}
	path := req.State.Path
	if path == "" { // an import, with no state yet
		path = req.ID
	}
	return infer.ReadResponse[FileArgs, FileState]{
		ID:     req.ID,
		Inputs: FileArgs{Path: path, Content: string(data)},
		State:  FileState{Path: path, Content: string(data)},
	}, nil
}

// Diff reports a change of content as an update and a change of path as a
// replacement. The old file is deleted before the new one is written, so a
// new path naming the same file ("a.txt" → "./a.txt") does not lose it.
func (*File) Diff(ctx context.Context, req infer.DiffRequest[FileArgs, FileState]) (infer.DiffResponse, error) {
	if err := hold(ctx, "diff", req.ID); err != nil {
		return infer.DiffResponse{}, err
	}
	if err := delayBy(ctx, "STACKDTEST_DIFF_DELAY"); err != nil {
		return infer.DiffResponse{}, err
	}
	diff := map[string]p.PropertyDiff{}
	if req.Inputs.Path != req.State.Path {
		diff["path"] = p.PropertyDiff{Kind: p.UpdateReplace, InputDiff: true}
	}
	if req.Inputs.Content != req.State.Content {
		diff["content"] = p.PropertyDiff{Kind: p.Update, InputDiff: true}
	}
	return infer.DiffResponse{
		HasChanges:          len(diff) > 0,
		DetailedDiff:        diff,
		DeleteBeforeReplace: true,
	}, nil
}

// Update rewrites the file in place (the path is unchanged: a new path is a
// replacement).
func (*File) Update(ctx context.Context, req infer.UpdateRequest[FileArgs, FileState]) (infer.UpdateResponse[FileState], error) {
	if !req.DryRun {
		if err := step(ctx, "update", req.ID); err != nil {
			return infer.UpdateResponse[FileState]{}, err
		}
		if err := write(req.ID, req.Inputs.Content); err != nil {
			return infer.UpdateResponse[FileState]{}, err
		}
	}
	return infer.UpdateResponse[FileState]{Output: FileState(req.Inputs)}, nil
}

// Delete removes the file; a file that is already gone is fine.
func (*File) Delete(ctx context.Context, req infer.DeleteRequest[FileState]) (infer.DeleteResponse, error) {
	if err := step(ctx, "delete", req.ID); err != nil {
		return infer.DeleteResponse{}, err
	}
	if err := os.Remove(req.ID); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return infer.DeleteResponse{}, err
	}
	return infer.DeleteResponse{}, nil
}

// write writes content to the file at the absolute path abs with mode 0644,
// creating the parent directories.
func write(abs, content string) error {
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return err
	}
	return os.WriteFile(abs, []byte(content), 0o644)
}

// absPath resolves a File's path: relative paths start at STACKDTEST_ROOT
// when it is set, else at the working directory.
func absPath(path string) (string, error) {
	if root := os.Getenv("STACKDTEST_ROOT"); root != "" && !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	return filepath.Abs(path)
}

// step is what comes before the create, update or delete (op) of the
// File at abs: the wait at its gate, if the test closed it, then the
// STACKDTEST_DELAY.
func step(ctx context.Context, op, abs string) error {
	if err := hold(ctx, op, abs); err != nil {
		return err
	}
	return delayBy(ctx, "STACKDTEST_DELAY")
}

// hold waits at the gate of the operation op on the File at abs (or the
// Sleep whose gate is abs) while the gate is closed: while the file
// STACKDTEST_HOLD/<op>-<base of abs> exists ("update-app.txt"). The
// operations are create, update, delete and diff (a File's diff, which
// previews make too). Waiting, it writes <gate>.held, so that the
// test knows the operation is under way and stays so until it removes
// the gate (the release). It returns at once when STACKDTEST_HOLD is
// unset or the gate open, and with ctx's error when ctx ends first.
//
// A test thus acts in the middle of an operation at a point it knows,
// however loaded the machine: it closes the gate, waits for .held, acts,
// and releases.
func hold(ctx context.Context, op, abs string) error {
	dir := os.Getenv("STACKDTEST_HOLD")
	if dir == "" {
		return nil
	}
	gate := filepath.Join(dir, op+"-"+filepath.Base(abs))
	if _, err := os.Stat(gate); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	held := gate + ".held"
	if err := os.WriteFile(held, []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("STACKDTEST_HOLD: %w", err)
	}
	defer os.Remove(held)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(gate); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// delayBy sleeps for the duration the environment variable name gives
// (none when unset), or until ctx ends.
func delayBy(ctx context.Context, name string) error {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return wait(ctx, d)
}

// Sleep is a resource that only takes time: its create and update wait
// for Duration (or until the operation is cancelled).
type Sleep struct{}

// SleepArgs are the inputs of a Sleep; a change of any of them is an
// update, which waits again.
type SleepArgs struct {
	// Duration is a Go duration ("2s").
	Duration string `pulumi:"duration"`
	// Trigger is free text: changing it makes an update.
	Trigger string `pulumi:"trigger,optional"`
	// Gate names the gates of its create and update ("create-<gate>",
	// see hold); none when empty.
	Gate string `pulumi:"gate,optional"`
}

// Annotate describes the resource in the schema and gives it its token.
func (s *Sleep) Annotate(a infer.Annotator) {
	a.Describe(&s, "A resource whose create and update take the given time, for stackd's tests.")
	a.SetToken("index", "Sleep")
}

// Create waits, then reports the inputs as the state.
func (*Sleep) Create(ctx context.Context, req infer.CreateRequest[SleepArgs]) (infer.CreateResponse[SleepArgs], error) {
	if !req.DryRun {
		if err := sleepAt(ctx, "create", req.Inputs); err != nil {
			return infer.CreateResponse[SleepArgs]{}, err
		}
	}
	return infer.CreateResponse[SleepArgs]{ID: "sleep", Output: req.Inputs}, nil
}

// Update waits again.
func (*Sleep) Update(ctx context.Context, req infer.UpdateRequest[SleepArgs, SleepArgs]) (infer.UpdateResponse[SleepArgs], error) {
	if !req.DryRun {
		if err := sleepAt(ctx, "update", req.Inputs); err != nil {
			return infer.UpdateResponse[SleepArgs]{}, err
		}
	}
	return infer.UpdateResponse[SleepArgs]{Output: req.Inputs}, nil
}

// sleepAt waits at the gate of op on args.Gate, if any, then for
// args.Duration, or until ctx ends.
func sleepAt(ctx context.Context, op string, args SleepArgs) error {
	v, err := time.ParseDuration(args.Duration)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	if args.Gate != "" {
		if err := hold(ctx, op, args.Gate); err != nil {
			return err
		}
	}
	return wait(ctx, v)
}

// wait waits for d, or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// GetEnv is the function stackdtest:index:getEnv.
type GetEnv struct{}

// GetEnvArgs names the variable.
type GetEnvArgs struct {
	Name string `pulumi:"name"`
}

// GetEnvResult is the variable's value, empty when it is not set.
type GetEnvResult struct {
	Value string `pulumi:"value"`
}

// Annotate gives the function its token.
func (g *GetEnv) Annotate(a infer.Annotator) {
	a.Describe(&g, "Returns an environment variable of the provider process.")
	a.SetToken("index", "getEnv")
}

// Invoke reads the variable.
func (*GetEnv) Invoke(ctx context.Context, req infer.FunctionRequest[GetEnvArgs]) (infer.FunctionResponse[GetEnvResult], error) {
	return infer.FunctionResponse[GetEnvResult]{Output: GetEnvResult{Value: os.Getenv(req.Input.Name)}}, nil
}

// Run is the function stackdtest:index:run.
type Run struct{}

// RunArgs is the command, run with sh -c.
type RunArgs struct {
	Command string `pulumi:"command"`
}

// RunResult is what the command printed on stdout and stderr.
type RunResult struct {
	Output string `pulumi:"output"`
}

// Annotate gives the function its token.
func (r *Run) Annotate(a infer.Annotator) {
	a.Describe(&r, "Runs a shell command in the provider process and returns its output.")
	a.SetToken("index", "run")
}

// Invoke runs the command; a command that fails fails the call.
func (*Run) Invoke(ctx context.Context, req infer.FunctionRequest[RunArgs]) (infer.FunctionResponse[RunResult], error) {
	out, err := exec.CommandContext(ctx, "sh", "-c", req.Input.Command).CombinedOutput()
	if err != nil {
		return infer.FunctionResponse[RunResult]{}, fmt.Errorf("%s: %w: %s", req.Input.Command, err, out)
	}
	return infer.FunctionResponse[RunResult]{Output: RunResult{Output: string(out)}}, nil
}
