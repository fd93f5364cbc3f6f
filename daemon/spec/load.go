package spec

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// MaxConfigFileSize bounds one config file. Stack specs are small; a
// larger file is almost certainly the wrong file.
const MaxConfigFileSize = 8 << 20

// DefaultMaxSourceBytes bounds the files of one config source together
// (Input.MaxBytes): 16 MiB is thousands of stack specs, and loads in
// about 0.15 s and 60 MB of heap, where the per-file bound alone let a
// directory of 40 files take 2.3 s and 570 MB (BenchmarkLoadLargeSource).
const DefaultMaxSourceBytes = 16 << 20

// Annotations with a meaning for stackd.
const (
	AnnotationReconcileRequest = "pulumi.com/reconciliation-request"
	AnnotationSyncWave         = "argocd.argoproj.io/sync-wave"
	AnnotationExternalLink     = "link.argocd.argoproj.io/external-link"
)

// Config is a loaded and validated set of stacks with the programs,
// ConfigMaps and Secrets they may refer to.
type Config struct {
	// Stacks are in the order they were read: files sorted by name,
	// documents and list items in file order.
	Stacks   []*Stack
	Programs map[string]*Program
	// ConfigMaps and Secrets hold the data of ConfigMap and Secret
	// documents, by name then key. Secret values are secrets.
	ConfigMaps map[string]map[string]string
	Secrets    map[string]map[string]string
	// GitRepositories are the Flux GitRepository documents, by name.
	GitRepositories map[string]*GitRepository
	// ChangeWindows are the changeWindows of every compact document, in
	// the order they were read; they apply to the stacks of every source.
	ChangeWindows []*ChangeWindow
	// StackSets are the StackSet documents and compact stackSets: items,
	// in the order they were read. Their generated stacks are in Stacks.
	StackSets []*StackSet
}

// Stack is one stack of a config.
type Stack struct {
	Name        string
	Spec        StackSpec
	Annotations map[string]string
	// Labels are the stack's metadata labels: roles of the access file
	// may select stacks by them.
	Labels map[string]string
	// SyncWave orders stacks of one config that no prerequisite orders.
	SyncWave int
	// Pos is where the stack's name is written.
	Pos Pos
	// Dir is the absolute directory of the file that defines the stack;
	// relative FS references start there.
	Dir string
	// Source is the config source (a --config value) that defines the
	// stack; sync waves and health roll up per source.
	Source string
	// Root is the Git checkout the stack's manifest comes from; empty
	// for local files. Whoever commits to that repository wrote the
	// spec: its FS references stay inside Root and its Env references
	// read only allowed names (RefSources.EnvAllow).
	Root string
	// Owner is "StackSet/NAME" for a stack that set generated; empty for
	// a stack written out.
	Owner string
	// gitFilled are the paths of the spec that a StackSet's template
	// filled from parameters of a set with a git generator, whose
	// repository's committers wrote them (see FromGit).
	gitFilled map[string]bool

	// hostPaths are the rules of its input on the paths of the host it
	// may name (Input.HostPaths).
	hostPaths *HostPaths

	src  map[string]Pos // positions of values in the defining document
	keys map[string]Pos // positions of mapping keys in it
	base string         // path of the spec: "spec" or "stacks[N]"
	// namePath is the path of the stack's name.
	namePath string
}

// FromGit says whether whoever commits to a Git repository wrote the
// field at path of the spec ("backend", "envRefs.TOKEN"), so that the
// rules of a config from Git apply to it: the stack's config is read from
// Git (Root), or its StackSet filled the field, a part of it or a key
// above it from the parameters of a set with a git generator. A local
// config's own values, written in its template, stay the operator's.
func (s *Stack) FromGit(path string) bool {
	if s.Root != "" {
		return true
	}
	for p := range s.gitFilled {
		if p == path || strings.HasPrefix(path, p+".") || strings.HasPrefix(p, path+".") ||
			strings.HasPrefix(path, p+"[") || strings.HasPrefix(p, path+"[") {
			return true
		}
	}
	return false
}

// Program is a Program document: a Pulumi YAML program kept in the config.
type Program struct {
	Name    string
	Program ProgramSpec
	Pos     Pos

	src  map[string]Pos
	base string // path of the body: "program" or "programs[N]"
}

// Stack returns the stack named name, or nil.
func (c *Config) Stack(name string) *Stack {
	for _, s := range c.Stacks {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// ReconcileRequest is the value of the stack's reconciliation-request
// annotation: a new value asks for a sync.
func (s *Stack) ReconcileRequest() string {
	return s.Annotations[AnnotationReconcileRequest]
}

// ExternalLink is the stack's external-link annotation, for the UI.
func (s *Stack) ExternalLink() string {
	return s.Annotations[AnnotationExternalLink]
}

// Load reads config files and directories (every *.yaml and *.yml below a
// directory, skipping hidden entries such as Kubernetes' ..data), parses
// every document strictly and validates the whole config. It has no side
// effects. The diagnostics hold every error and note found; when there is
// an error, Load returns a *ConfigError and no config.
func Load(paths ...string) (*Config, Diagnostics, error) {
	inputs := make([]Input, len(paths))
	for i, p := range paths {
		inputs[i] = Input{Source: p, Path: p}
	}
	return LoadInputs(inputs)
}

// Parse parses and validates one file's content as a whole config.
func Parse(name string, data []byte) (*Config, Diagnostics, error) {
	l := newLoader()
	l.addFile(name, absDir(name), data)
	return l.complete(nil)
}

// Input is one config source as the loader reads it.
type Input struct {
	// source is the --config value; it becomes Stack.Source.
	Source string
	// path is the file or directory to read.
	Path string
	// shown, when set, names the files of path in diagnostics: shown
	// followed by the file's path below path. A checkout's files are
	// named after the repository rather than the data dir.
	Shown string
	// emptyOK makes a missing or empty directory an empty source rather
	// than an error: a Git commit that deletes every manifest says "no
	// stacks", and the mass-removal guard decides.
	EmptyOK bool
	// Root, set for a Git source, is the checkout Path lies in. Its
	// files are read through it (a symbolic link cannot lead out), and
	// its stacks' FS references are confined to it (Stack.Root).
	Root string
	// MaxBytes bounds the size of the source's files together
	// (DefaultMaxSourceBytes when 0; no bound when negative). Sizes are
	// checked before any file is read, and reads are bounded too, so a
	// file that grows meanwhile is not read past the limit. A single
	// file is bounded by MaxConfigFileSize as well.
	MaxBytes int64
	// HostPaths says which paths of the host its stacks may name as a
	// file backend or a local repository; validation refuses the others.
	HostPaths HostPaths
}

// LoadInputs reads the inputs and validates them as one config. Its
// StackSets are checked, not expanded: it generates no stacks (see
// LoadInputsExpanding).
func LoadInputs(inputs []Input) (*Config, Diagnostics, error) {
	return LoadInputsExpanding(inputs, nil)
}

// LoadInputsExpanding reads the inputs as LoadInputs does and, when
// expand is not nil and the config read has no error, renders the stacks
// of each StackSet from the parameter sets expand returns for it. The
// generated stacks follow the written ones in Config.Stacks, in set
// order then in the order expand returned them, and the whole config is
// validated as one: a generated stack's name may clash with a written
// one's, a prerequisite may name a generated stack. Every error of a
// generated stack names its set, generator and origin.
func LoadInputsExpanding(inputs []Input, expand Expander) (*Config, Diagnostics, error) {
	l := newLoader()
	for _, in := range inputs {
		l.source, l.root, l.hostPaths = in.Source, in.Root, &in.HostPaths
		l.addInput(in)
	}
	return l.complete(expand)
}

type loader struct {
	cfg    *Config
	diags  Diagnostics
	files  int
	source string // of the stacks being read
	root   string // of the input being read; see Input.Root
	// hostPaths are the input's Input.HostPaths.
	hostPaths *HostPaths
	// nodes counts the YAML nodes decoded so far, against maxNodes.
	nodes int
}

func newLoader() *loader {
	return &loader{cfg: &Config{
		Programs:   map[string]*Program{},
		ConfigMaps: map[string]map[string]string{},
		Secrets:    map[string]map[string]string{},
	}}
}

func (l *loader) fileError(name, format string, args ...any) {
	l.diags = append(l.diags, Diagnostic{Pos: Pos{File: name}, Msg: fmt.Sprintf(format, args...)})
}

func (l *loader) addInput(in Input) {
	shown := func(p string) string {
		if in.Shown == "" {
			return p
		}
		rel, err := filepath.Rel(in.Path, p)
		if err != nil || rel == "." {
			return in.Shown
		}
		return strings.TrimSuffix(in.Shown, "/") + "/" + filepath.ToSlash(rel)
	}
	info, err := os.Stat(in.Path)
	if err != nil {
		if !in.EmptyOK || !errors.Is(err, fs.ErrNotExist) {
			l.fileError(shown(in.Path), "%v", unwrapPathError(err))
		}
		return
	}
	files := []string{in.Path}
	if info.IsDir() {
		if files, err = configFiles(in.Path); err != nil {
			l.fileError(shown(in.Path), "%v", unwrapPathError(err))
			return
		}
		if len(files) == 0 && !in.EmptyOK {
			l.fileError(shown(in.Path), "directory holds no *.yaml or *.yml files")
		}
	}
	l.readFiles(in, files, shown)
}

// readFiles reads the files of in after checking their sizes: a file
// over MaxConfigFileSize is reported and skipped, and files over
// in.MaxBytes together are not read at all. Reads are bounded by what
// the sizes allowed, for files that grow meanwhile.
func (l *loader) readFiles(in Input, files []string, shown func(string) string) {
	limit := in.MaxBytes
	if limit == 0 {
		limit = DefaultMaxSourceBytes
	}
	var total int64
	var fit []string
	for _, f := range files {
		size, err := l.size(f)
		switch {
		case err != nil:
			l.fileError(shown(f), "%v", unwrapPathError(err))
		case size > MaxConfigFileSize:
			l.fileError(shown(f), "%s, more than %s (the limit of one config file); not a config file?", sizeText(size), sizeText(MaxConfigFileSize))
		default:
			total += size
			fit = append(fit, f)
		}
	}
	if limit > 0 && total > limit {
		l.fileError(shown(in.Path), "config source %s is %s, more than --max-config-bytes %s; not read", in.Source, sizeText(total), sizeText(limit))
		return
	}
	var read int64
	for _, f := range fit {
		most := int64(MaxConfigFileSize)
		if limit > 0 {
			most = min(most, limit-read)
		}
		data, err := l.readFile(f, most)
		if err != nil {
			l.fileError(shown(f), "%v", unwrapPathError(err))
			continue
		}
		if int64(len(data)) > most && most < MaxConfigFileSize {
			l.fileError(shown(in.Path), "config source %s grew past --max-config-bytes %s while being read; not read", in.Source, sizeText(limit))
			return
		}
		read += int64(len(data))
		l.addFile(shown(f), absDir(f), data) // reports a file over MaxConfigFileSize
	}
}

// sizeText writes n bytes for people: "16777216 bytes (16.0 MiB)".
func sizeText(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
}

// size returns the size of a config file, through the checkout root
// like open.
func (l *loader) size(path string) (int64, error) {
	f, err := l.open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func absDir(name string) string {
	dir, err := filepath.Abs(filepath.Dir(name))
	if err != nil {
		return filepath.Dir(name)
	}
	return dir
}

// configFiles lists the YAML files below dir, sorted, skipping hidden
// files and directories.
func configFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		hidden := strings.HasPrefix(e.Name(), ".") && p != dir
		switch {
		case hidden && e.IsDir():
			return filepath.SkipDir
		case hidden || e.IsDir():
			return nil
		}
		if ext := filepath.Ext(p); ext == ".yaml" || ext == ".yml" {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readFile reads the file at path, up to one byte more than most (so
// that a caller sees that it is larger).
func (l *loader) readFile(path string, most int64) ([]byte, error) {
	f, err := l.open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, most+1))
}

// open opens a config file; inside a Git checkout, through it, so that a
// symbolic link cannot make the loader read a file of the host.
func (l *loader) open(path string) (*os.File, error) {
	if l.root == "" {
		return os.Open(path)
	}
	rel, err := filepath.Rel(l.root, path)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(l.root)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, errors.New("a symbolic link that leads outside the repository; not read")
		}
		return nil, err
	}
	return f, nil
}

// addFile parses one file's documents into the config under construction;
// dir is the file's absolute directory, where relative references start.
func (l *loader) addFile(name, dir string, data []byte) {
	l.files++
	if len(data) > MaxConfigFileSize {
		l.fileError(name, "larger than %d bytes; not a config file?", MaxConfigFileSize)
		return
	}
	if off := binaryOffset(data); off >= 0 {
		l.fileError(name, "not a YAML text file (binary data at byte %d)", off)
		return
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	docs := 0
	for {
		var root yaml.Node
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			l.diags = append(l.diags, SyntaxError(name, data, err))
			return
		}
		if len(root.Content) == 0 || isNull(root.Content[0]) {
			continue // an empty document, e.g. after a trailing ---
		}
		docs++
		l.addDocument(name, dir, root.Content[0])
	}
	if docs == 0 {
		l.fileError(name, "holds no YAML documents")
	}
}

// binaryOffset returns the offset of the first byte that cannot be in a
// YAML text file (NUL or invalid UTF-8), or -1.
func binaryOffset(data []byte) int {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return i
	}
	if utf8.Valid(data) {
		return -1
	}
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}

var yamlLineError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// SyntaxError turns a YAML parser error of the file name holding data
// into a diagnostic at the line where the parser stopped (yaml.v3 gives
// no column), with a clearer message and the column for tab indentation.
// The roles file's parser (auth) reports its YAML errors with it too.
func SyntaxError(name string, data []byte, err error) Diagnostic {
	line, msg := splitYAMLError(err)
	if stop := stopLine(data, msg); stop > 0 {
		line = stop
	}
	pos := Pos{File: name, Line: line}
	if line, col := tabIndent(data, pos.Line); line > 0 {
		pos.Line, pos.Col = line, col
		msg = "tab character in indentation (YAML indents with spaces only)"
	}
	return Diagnostic{Pos: pos, Path: "yaml", Msg: "syntax error: " + msg}
}

func splitYAMLError(err error) (int, string) {
	if m := yamlLineError.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return line, m[2]
	}
	return 0, strings.TrimPrefix(err.Error(), "yaml: ")
}

// maxStopSearch bounds the input stopLine searches (it parses each prefix).
const maxStopSearch = 64 << 10

// stopLine finds where the parser stops: the shortest prefix of whole
// lines that fails with the same message. yaml.v3's own line number is
// that of the construct the parser was in (0-based for parser errors),
// often far above the mistake, so it is only a fallback.
func stopLine(data []byte, msg string) int {
	if len(data) > maxStopSearch {
		return 0
	}
	for i, end := range lineEnds(data) {
		if _, m := splitYAMLError(firstYAMLError(data[:end])); m == msg {
			return i + 1
		}
	}
	return 0
}

// lineEnds returns the offset just past each line of data, breaking lines
// where YAML does: LF, CRLF, CR, NEL, LS and PS.
func lineEnds(data []byte) []int {
	var ends []int
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		i += size
		switch r {
		case '\r':
			if i < len(data) && data[i] == '\n' {
				i++
			}
			ends = append(ends, i)
		case '\n', '\u0085', '\u2028', '\u2029':
			ends = append(ends, i)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] < len(data) {
		ends = append(ends, len(data))
	}
	return ends
}

func firstYAMLError(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("")
			}
			return err
		}
	}
}

// tabIndent finds a tab in the leading white space of the line the parser
// stopped at (or the line before it, where the YAML parser often points),
// and returns its line and column.
func tabIndent(data []byte, near int) (int, int) {
	ends := lineEnds(data)
	for _, ln := range []int{near, near - 1, near + 1} {
		if ln < 1 || ln > len(ends) {
			continue
		}
		start := 0
		if ln > 1 {
			start = ends[ln-2]
		}
		text := data[start:ends[ln-1]]
		indent := len(text) - len(bytes.TrimLeft(text, " \t"))
		if i := bytes.IndexByte(text[:indent], '\t'); i >= 0 {
			return ln, i + 1
		}
	}
	return 0, 0
}

// addDocument dispatches one document by its shape.
func (l *loader) addDocument(file, dir string, n *yaml.Node) {
	if l.nodes >= maxNodes {
		return // reported once, at the document that went over
	}
	d := newDecoder(file, &l.nodes)
	defer func() { l.diags = append(l.diags, d.diags...) }()
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "", "expected a mapping (a manifest or a stacks: list), got %s", describe(n))
		return
	}
	keys := topKeys(n)
	switch {
	case keys["apiVersion"] != nil || keys["kind"] != nil:
		l.addManifest(d, dir, n, keys)
	case keys["stacks"] != nil || keys["programs"] != nil || keys["changeWindows"] != nil || keys["stackSets"] != nil:
		l.addCompact(d, dir, n)
	default:
		d.errorf(n, "", "not a stackd document: expected a manifest (apiVersion, kind) or a stacks:/programs:/changeWindows:/stackSets: list")
	}
}

// topKeys maps a mapping's scalar keys to their values.
func topKeys(n *yaml.Node) map[string]*yaml.Node {
	keys := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode {
			keys[k.Value] = n.Content[i+1]
		}
	}
	return keys
}

// objectMeta is Kubernetes' metadata; name, annotations and labels
// matter.
type objectMeta struct {
	Name                       string            `yaml:"name"`
	Annotations                map[string]string `yaml:"annotations"`
	Labels                     map[string]string `yaml:"labels"`
	Namespace                  Ignored           `yaml:"namespace" stackd:"k8s"`
	GenerateName               Ignored           `yaml:"generateName" stackd:"k8s"`
	UID                        Ignored           `yaml:"uid" stackd:"k8s"`
	ResourceVersion            Ignored           `yaml:"resourceVersion" stackd:"k8s"`
	Generation                 Ignored           `yaml:"generation" stackd:"k8s"`
	CreationTimestamp          Ignored           `yaml:"creationTimestamp" stackd:"k8s"`
	DeletionTimestamp          Ignored           `yaml:"deletionTimestamp" stackd:"k8s"`
	DeletionGracePeriodSeconds Ignored           `yaml:"deletionGracePeriodSeconds" stackd:"k8s"`
	Finalizers                 Ignored           `yaml:"finalizers" stackd:"k8s"`
	OwnerReferences            Ignored           `yaml:"ownerReferences" stackd:"k8s"`
	ManagedFields              Ignored           `yaml:"managedFields" stackd:"k8s"`
}

type manifestHead struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	Status     Ignored    `yaml:"status" stackd:"k8s"`
}

type stackManifest struct {
	manifestHead `yaml:",inline"`
	Spec         StackSpec `yaml:"spec"`
}

type programManifest struct {
	manifestHead `yaml:",inline"`
	Program      ProgramSpec `yaml:"program"`
}

type configMapManifest struct {
	manifestHead `yaml:",inline"`
	Data         map[string]string `yaml:"data"`
	BinaryData   Ignored           `yaml:"binaryData" stackd:"k8s"`
	Immutable    Ignored           `yaml:"immutable" stackd:"k8s"`
}

type gitRepositoryManifest struct {
	manifestHead `yaml:",inline"`
	Spec         GitRepository `yaml:"spec"`
}

type secretManifest struct {
	manifestHead `yaml:",inline"`
	Data         map[string]string `yaml:"data"`
	StringData   map[string]string `yaml:"stringData"`
	Type         Ignored           `yaml:"type" stackd:"k8s"`
	Immutable    Ignored           `yaml:"immutable" stackd:"k8s"`
}

func (l *loader) addManifest(d *decoder, dir string, n *yaml.Node, keys map[string]*yaml.Node) {
	apiVersion, kind := scalarOf(keys["apiVersion"]), scalarOf(keys["kind"])
	group, version, _ := strings.Cut(apiVersion, "/")
	switch {
	case apiVersion == "":
		d.errorf(n, "apiVersion", "missing apiVersion")
	case kind == "":
		d.errorf(n, "kind", "missing kind")
	case group == "pulumi.com" && version != "v1" && version != "v1alpha1":
		d.errorf(keys["apiVersion"], "apiVersion", "unsupported version of pulumi.com (stackd reads v1 and v1alpha1)")
	case group == "pulumi.com" && kind == "Stack":
		var m stackManifest
		d.decode(n, "", reflect.ValueOf(&m).Elem())
		l.addStack(d, dir, m.Metadata.Name, stackMeta{m.Metadata.Annotations, m.Metadata.Labels}, m.Spec, "metadata.name", "spec")
	case group == "pulumi.com" && kind == "Program":
		var m programManifest
		d.decode(n, "", reflect.ValueOf(&m).Elem())
		l.addProgram(d, m.Metadata.Name, m.Program, "metadata.name", "program")
	case group == "pulumi.com":
		d.errorf(keys["kind"], "kind", "unknown pulumi.com kind (stackd reads Stack and Program)")
	case group == "stackd.io":
		l.addStackSetManifest(d, dir, n, keys, version, kind)
	case apiVersion == "v1" && kind == "ConfigMap":
		// Paths in such documents name the document: a note or an error
		// on "data.x" alone would not say which of many it is.
		var m configMapManifest
		d.decode(n, docPath(kind, keys), reflect.ValueOf(&m).Elem())
		l.addData(d, l.cfg.ConfigMaps, m.Metadata.Name, m.Data, "ConfigMap", docPath(kind, keys))
	case apiVersion == "v1" && kind == "Secret":
		l.addSecret(d, n, docPath(kind, keys))
	case group == "source.toolkit.fluxcd.io" && kind == "GitRepository" && (version == "v1" || version == "v1beta2"):
		var m gitRepositoryManifest
		d.decode(n, "", reflect.ValueOf(&m).Elem())
		if l.checkName(d, m.Metadata.Name, "metadata.name") {
			if l.cfg.GitRepositories == nil {
				l.cfg.GitRepositories = map[string]*GitRepository{}
			}
			l.cfg.GitRepositories[m.Metadata.Name] = &m.Spec
		}
	default:
		name := scalarOf(topKeys(orEmpty(keys["metadata"]))["name"])
		d.notef(n, "kind", "skipped: %s %s %q is not a stackd kind", apiVersion, kind, name)
	}
}

// docPath is the path prefix of a Secret or ConfigMap document's fields:
// `Secret "name"`.
func docPath(kind string, keys map[string]*yaml.Node) string {
	return fmt.Sprintf("%s %q", kind, scalarOf(topKeys(orEmpty(keys["metadata"]))["name"]))
}

func (l *loader) addSecret(d *decoder, n *yaml.Node, base string) {
	var m secretManifest
	d.decode(n, base, reflect.ValueOf(&m).Elem())
	data := map[string]string{}
	for k, v := range m.Data {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			p := joinPath(base, "data."+k)
			d.errorf(nodeAt(d, p), p, "not valid base64") // at the value, not the document
			continue
		}
		data[k] = string(b)
	}
	for k, v := range m.StringData {
		data[k] = v // stringData wins, as in Kubernetes
	}
	l.addData(d, l.cfg.Secrets, m.Metadata.Name, data, "Secret", base)
}

func (l *loader) addData(d *decoder, into map[string]map[string]string, name string, data map[string]string, kind, base string) {
	p := joinPath(base, "metadata.name")
	if !l.checkName(d, name, p) {
		return
	}
	if _, dup := into[name]; dup {
		d.errorf(nodeAt(d, p), p, "duplicate %s name %q", kind, name)
		return
	}
	into[name] = data
}

type compactDoc struct {
	Stacks        []compactStack    `yaml:"stacks"`
	Programs      []compactProgram  `yaml:"programs"`
	ChangeWindows []ChangeWindow    `yaml:"changeWindows"`
	StackSets     []compactStackSet `yaml:"stackSets"`
}

type compactStack struct {
	Name        string            `yaml:"name"`
	Annotations map[string]string `yaml:"annotations"`
	Labels      map[string]string `yaml:"labels"`
	StackSpec   `yaml:",inline"`
}

// stackMeta is what a stack's document says of it besides its spec.
type stackMeta struct {
	annotations, labels map[string]string
}

type compactProgram struct {
	Name        string `yaml:"name"`
	ProgramSpec `yaml:",inline"`
}

func (l *loader) addCompact(d *decoder, dir string, n *yaml.Node) {
	pasted := pastedStacks(d, topKeys(n)["changeWindows"])
	var doc compactDoc
	d.decode(n, "", reflect.ValueOf(&doc).Elem())
	for i, s := range doc.Stacks {
		base := indexPath("stacks", i)
		l.addStack(d, dir, s.Name, stackMeta{s.Annotations, s.Labels}, s.StackSpec, base+".name", base)
	}
	for i, p := range doc.Programs {
		base := indexPath("programs", i)
		l.addProgram(d, p.Name, p.ProgramSpec, base+".name", base)
	}
	for i, w := range doc.ChangeWindows {
		if !pasted[i] {
			l.addWindow(d, w, indexPath("changeWindows", i))
		}
	}
	for i, s := range doc.StackSets {
		base := indexPath("stackSets", i)
		l.addStackSet(d, dir, s.Name, s.Labels, s.StackSetSpec, base)
	}
}

// pastedStacks reports each item of list, a compact document's
// changeWindows, that looks like a stack (see stackFields) with one error
// naming the likely cause, a stack pasted under changeWindows: rather than
// stacks:, where its fields would each be a window's error. It empties
// those items, so that decoding reports nothing more of them, and returns
// their indexes.
func pastedStacks(d *decoder, list *yaml.Node) map[int]bool {
	if list == nil || list.Kind != yaml.SequenceNode {
		return nil
	}
	pasted := map[int]bool{}
	for i, item := range list.Content {
		if item.Kind != yaml.MappingNode {
			continue
		}
		fields := stackFields(slices.Sorted(maps.Keys(topKeys(item))))
		if len(fields) == 0 {
			continue
		}
		d.errorf(item, indexPath("changeWindows", i),
			"this looks like a stack (it has %s), not a change window: is it meant to be under stacks:?", strings.Join(fields, ", "))
		item.Content = nil
		pasted[i] = true
	}
	return pasted
}

// stackFields returns those of keys, a mapping's keys, that are fields of
// a stack and not of a change window, when they make the mapping look like
// a stack: projectRepo or programRef among them, or two or more. A window
// with one misspelt field ("stack" for "stacks") is not a stack. It is
// pure.
func stackFields(keys []string) []string {
	stack, window := fieldsOf(reflect.TypeFor[compactStack]()), fieldsOf(reflect.TypeFor[ChangeWindow]())
	var fields []string
	defining := false
	for _, k := range keys {
		_, inStack := stack.byName[k]
		_, inWindow := window.byName[k]
		if inStack && !inWindow {
			fields = append(fields, k)
			defining = defining || k == "projectRepo" || k == "programRef"
		}
	}
	if !defining && len(fields) < 2 {
		return nil
	}
	return fields
}

// addStack adds a stack to the config and returns it; nil when its name
// is not valid.
func (l *loader) addStack(d *decoder, dir, name string, meta stackMeta, spec StackSpec, namePath, base string) *Stack {
	if !l.checkName(d, name, namePath) {
		return nil
	}
	s := &Stack{
		Name:        name,
		Spec:        spec,
		Annotations: meta.annotations,
		Labels:      meta.labels,
		Pos:         d.src[namePath],
		Dir:         dir,
		Source:      l.source,
		Root:        l.root,
		hostPaths:   l.hostPaths,
		src:         d.src,
		keys:        d.keys,
		base:        base,
		namePath:    namePath,
	}
	l.cfg.Stacks = append(l.cfg.Stacks, s)
	return s
}

func (l *loader) addProgram(d *decoder, name string, p ProgramSpec, namePath, base string) {
	if !l.checkName(d, name, namePath) {
		return
	}
	if _, dup := l.cfg.Programs[name]; dup {
		d.errorf(nodeAt(d, namePath), namePath, "duplicate Program name %q", name)
		return
	}
	l.cfg.Programs[name] = &Program{Name: name, Program: p, Pos: d.src[namePath], src: d.src, base: base}
}

// checkName reports a missing or unsafe object name. Names become file
// and directory names, so they are held to Kubernetes' rules.
func (l *loader) checkName(d *decoder, name, path string) bool {
	pos, ok := d.src[path]
	for p := path; !ok && p != ""; { // the nearest parent written
		p = parentPath(p)
		pos, ok = d.src[p]
	}
	if msg := nameProblem(name, 253); msg != "" {
		d.diags = append(d.diags, Diagnostic{Pos: pos, Path: path, Msg: msg})
		return false
	}
	return true
}

// nodeAt returns a node carrying the position recorded for path, for
// errors raised after decoding.
func nodeAt(d *decoder, path string) *yaml.Node {
	pos, ok := d.src[path]
	for p := path; !ok && p != ""; { // the nearest parent written
		p = parentPath(p)
		pos, ok = d.src[p]
	}
	return &yaml.Node{Line: pos.Line, Column: pos.Col}
}

func scalarOf(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

func orEmpty(n *yaml.Node) *yaml.Node {
	if n == nil {
		return &yaml.Node{}
	}
	return n
}
