package spec

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxStackNameLength is PKO's limit on a Stack's name.
const MaxStackNameLength = 42

var (
	objectName   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	dataKey      = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	envVarName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	pulumiStack  = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}$`)
	fullSHA      = regexp.MustCompile(`^([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$`)
	scpLikeURL   = regexp.MustCompile(`^([^@/:]+@)?[^/:@]+:[^/].*$`)
	refTypeNames = []string{RefLiteral, RefEnv, RefFS, RefSecret, RefStackOutput}
)

// nameProblem returns why name cannot name an object, or "".
func nameProblem(name string, max int) string {
	switch {
	case name == "":
		return "missing name"
	case len(name) > max:
		return fmt.Sprintf("name longer than %d characters", max)
	case strings.Contains(name, ".."), !objectName.MatchString(name):
		return fmt.Sprintf("invalid name %q: use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit", name)
	}
	return ""
}

func (l *loader) finish() (*Config, Diagnostics, error) {
	v := &validator{cfg: l.cfg}
	for _, s := range l.cfg.Stacks {
		v.s = s
		v.fluxSource(&s.Spec)
	}
	v.validate()
	// The error lists what decoding found (an unknown field, a wrong
	// type) before what validating the whole found, which is often its
	// consequence: a misspelt branch is the cause of "needs a branch".
	errs := append(l.diags.Errors().sorted(), v.diags.Errors().sorted()...)
	l.diags = append(l.diags, v.diags...).sorted()
	if len(errs) > 0 {
		return nil, l.diags, &ConfigError{Diags: errs}
	}
	return l.cfg, l.diags, nil
}

// sorted sorts ds in file order, in place, and returns it.
func (ds Diagnostics) sorted() Diagnostics {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return ds
}

// validator checks a whole config once every document decoded: what one
// field's type cannot say, and what spans fields, stacks and files.
type validator struct {
	cfg   *Config
	diags Diagnostics
	s     *Stack // the stack being checked
}

// errorf reports a problem at path, relative to the current stack's spec.
func (v *validator) errorf(rel, format string, args ...any) {
	full := joinPath(v.s.base, rel)
	v.diags = append(v.diags, Diagnostic{Pos: v.at(full), Path: full, Msg: fmt.Sprintf(format, args...)})
}

// notef reports something worth knowing at path, relative to the
// current stack's spec: not a problem.
func (v *validator) notef(rel, format string, args ...any) {
	full := joinPath(v.s.base, rel)
	v.diags = append(v.diags, Diagnostic{Pos: v.at(full), Path: full, Msg: fmt.Sprintf(format, args...), Note: true})
}

// keyErrorf reports a problem with a map key, at the key.
func (v *validator) keyErrorf(rel, format string, args ...any) {
	full := joinPath(v.s.base, rel)
	pos, ok := v.s.keys[full]
	if !ok {
		pos = v.at(full)
	}
	v.diags = append(v.diags, Diagnostic{Pos: pos, Path: full, Msg: fmt.Sprintf(format, args...)})
}

// at finds the position recorded for full, or for its nearest parent.
func (v *validator) at(full string) Pos {
	for p := full; p != ""; p = parentPath(p) {
		if pos, ok := v.s.src[p]; ok {
			return pos
		}
	}
	return v.s.Pos
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

func (v *validator) validate() {
	seen := map[string]*Stack{}
	pulumiStacks := map[string]*Stack{}
	for _, s := range v.cfg.Stacks {
		v.s = s
		if first, dup := seen[s.Name]; dup {
			v.diags = append(v.diags, Diagnostic{Pos: s.Pos, Path: nameField(s),
				Msg: fmt.Sprintf("duplicate stack name %q (first defined at %s)", s.Name, first.Pos)})
			continue
		}
		seen[s.Name] = s
		if key := pulumiStackKey(&s.Spec); key != "" {
			if first, dup := pulumiStacks[key]; dup {
				v.errorf("stack", "stack %q is the same Pulumi stack as stack %q (defined at %s): the same backend, project and stack; two stacks would operate on one state",
					s.Name, first.Name, first.Pos)
			}
			pulumiStacks[key] = s
		}
		v.stack(s)
	}
	v.cycles()
	for _, name := range sortedKeys(v.cfg.Programs) {
		v.program(v.cfg.Programs[name])
	}
}

// program checks what Pulumi YAML would reject before running anything.
func (v *validator) program(p *Program) {
	v.s = &Stack{Name: p.Name, Pos: p.Pos, src: p.src, base: p.base}
	for _, name := range sortedKeys(p.Program.Resources) {
		if p.Program.Resources[name].Type == "" {
			v.errorf(joinPath("resources", name), "resource has no type")
		}
	}
	for _, name := range sortedKeys(p.Program.Configuration) {
		if c := p.Program.Configuration[name]; c.Type == "" && c.Default == nil {
			v.errorf(joinPath("configuration", name), "configuration value needs a type or a default")
		}
	}
}

// pulumiStackKey names the Pulumi stack s operates on when the config
// says it all: a backend of its own and the project (a stack named
// org/project/stack, or spec.project); empty otherwise, as the program
// then names the project, and on the default backend every stack keeps
// its state apart.
func pulumiStackKey(s *StackSpec) string {
	if s.Backend == "" {
		return ""
	}
	parts := strings.Split(s.Stack, "/")
	project := s.Project
	if len(parts) == 3 {
		project = parts[1]
	}
	if project == "" {
		return ""
	}
	return s.Backend + "\x00" + project + "\x00" + parts[len(parts)-1]
}

// nameField is the path of a stack's name, for duplicate reports.
func nameField(s *Stack) string {
	if s.namePath != "" {
		return s.namePath
	}
	if s.base == "spec" {
		return "metadata.name"
	}
	return s.base + ".name"
}

func (v *validator) stack(s *Stack) {
	if msg := nameProblem(s.Name, MaxStackNameLength); msg != "" {
		v.diags = append(v.diags, Diagnostic{Pos: s.Pos, Path: nameField(s), Msg: msg})
	}
	spec := &s.Spec
	switch {
	case spec.Stack == "":
		v.errorf("", "missing stack (the Pulumi stack name)")
	case !pulumiStack.MatchString(spec.Stack):
		v.errorf("stack", "invalid Pulumi stack name: want stack, org/stack or org/project/stack")
	}
	v.source(spec)
	v.configAndEnv(spec)
	v.prerequisites(spec)
	v.annotations(s)
	if spec.Backend != "" && !strings.Contains(spec.Backend, "://") {
		v.errorf("backend", "backend must be a URL such as file:///var/lib/state, s3://bucket or https://api.pulumi.com")
	} else if spec.Backend != "" {
		v.hostBackend("backend", spec.Backend)
	}
	v.driftDetection(spec.DriftDetection)
	v.approval(spec.Approval)
	v.credentials(spec.Credentials)
	v.reviewStacks(spec)
	v.workspaceVolumes(spec)
	v.nonEmpty("targets", spec.Targets)
	if t := spec.UpdateTemplate; t != nil && t.Spec != nil {
		v.nonEmpty("updateTemplate.spec.target", t.Spec.Target)
		v.nonEmpty("updateTemplate.spec.replace", t.Spec.Replace)
	}
}

func (v *validator) nonEmpty(rel string, items []string) {
	for i, item := range items {
		if strings.TrimSpace(item) == "" {
			v.errorf(indexPath(rel, i), "empty entry")
		}
	}
}

func (v *validator) source(spec *StackSpec) {
	hasRepo, hasProgram := spec.ProjectRepo != "", spec.ProgramRef != nil
	switch {
	case hasRepo && hasProgram:
		v.errorf("", "set either projectRepo or programRef, not both")
	case hasRepo:
		v.gitSource(spec)
	case hasProgram:
		v.programSource(spec)
	case spec.FluxSource != nil:
		// fluxSource said why it did not resolve.
	default:
		v.errorf("", "no source: set projectRepo (with branch or commit) or programRef")
	}
}

func (v *validator) gitSource(spec *StackSpec) {
	if msg := repoURLProblem(spec.ProjectRepo); msg != "" {
		v.errorf("projectRepo", "%s", msg)
	}
	switch {
	case spec.Branch != "" && spec.Commit != "":
		v.errorf("", "set either branch or commit, not both")
	case spec.Branch == "" && spec.Commit == "":
		v.errorf("", "projectRepo needs a branch to track or a commit to pin")
	case spec.Commit != "" && !IsFullSHA(spec.Commit):
		v.errorf("commit", "commit must be a full 40-character SHA (to follow a branch or tag, use branch)")
	case spec.Branch != "" && !validRefName(spec.Branch) && !(spec.FluxSource != nil && strings.HasPrefix(spec.Branch, SemverPrefix)):
		v.errorf("branch", "not a valid Git branch or tag name")
	}
	if spec.RepoDir != "" {
		clean := spec.RepoPath()
		switch {
		case clean == ".." || strings.HasPrefix(clean, "../"):
			v.errorf("repoDir", "repoDir must be a path inside the repository")
		case strings.HasPrefix(spec.RepoDir, "/"):
			v.notef("repoDir", "%s is taken relative to the repository root (%s), as PKO does", spec.RepoDir, clean)
		}
	}
	for i, g := range spec.Paths {
		if err := checkGlob(g); err != nil {
			v.errorf(fmt.Sprintf("paths[%d]", i), "%v", err)
		}
	}
	v.localRepo(spec)
	v.gitAuth(spec)
}

// hostBackend refuses a backend URL that names a path of the host the
// stack's config may not name (HostPaths.CheckBackend).
func (v *validator) hostBackend(rel, backend string) {
	if err := v.s.hosts().CheckBackend(backend, v.s.FromGit(rel)); err != nil {
		v.errorf(rel, "%v", err)
	}
}

// backendEnv checks an environment variable that names the backend, when
// its value is written in the config; other references are checked when
// the stack runs, once read.
func (v *validator) backendEnv(rel, name string, r ResourceRef) {
	if name == BackendURLEnv && r.Type == RefLiteral && r.Literal != nil {
		v.hostBackend(rel+".literal.value", r.Literal.Value)
	}
}

// localRepo refuses a projectRepo that is a local repository the stack's
// config may not name (HostPaths.CheckRepo).
func (v *validator) localRepo(spec *StackSpec) {
	dir, err := RepoPath(spec.ProjectRepo, v.s.Dir)
	if err == nil && dir != "" {
		err = v.s.hosts().CheckRepo(dir, v.s.FromGit("projectRepo"))
	}
	if err != nil {
		v.errorf("projectRepo", "%v", err)
	}
}

func (v *validator) programSource(spec *StackSpec) {
	name := spec.ProgramRef.Name
	switch {
	case name == "":
		v.errorf("programRef", "missing name")
	case v.cfg.Programs[name] == nil:
		v.errorf("programRef.name", "no Program named %q in the config", name)
	}
	for field, set := range map[string]bool{
		"branch": spec.Branch != "", "commit": spec.Commit != "", "repoDir": spec.RepoDir != "",
		"gitAuth": spec.GitAuth != nil, "shallow": spec.Shallow, "paths": len(spec.Paths) > 0,
	} {
		if set {
			v.errorf(field, "%s applies only to projectRepo sources", field)
		}
	}
}

// repoURLProblem returns why u cannot be fetched safely, or "". The
// message never quotes u: it may hold credentials.
func repoURLProblem(u string) string {
	if IsLocalPath(u) {
		return ""
	}
	if !strings.Contains(u, "://") {
		if scpLikeURL.MatchString(u) {
			return ""
		}
		return "not a repository URL (use https://, ssh://, git@host:path, file:// or a local path starting with /, ./ or ../)"
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return "not a valid URL"
	}
	switch parsed.Scheme {
	case "https", "http", "ssh", "git", "file":
	default:
		return fmt.Sprintf("unsupported URL scheme %q (use https, http, ssh, git or file)", parsed.Scheme)
	}
	if parsed.User != nil {
		_, hasPassword := parsed.User.Password()
		if hasPassword || parsed.Scheme == "https" || parsed.Scheme == "http" {
			return "credentials in the URL: put them in gitAuth instead"
		}
	}
	if parsed.Host == "" && parsed.Scheme != "file" {
		return "URL has no host"
	}
	return ""
}

// validRefName applies git-check-ref-format's rules to a branch or tag,
// written short ("main") or full ("refs/heads/main").
func validRefName(ref string) bool {
	if ref == "" || ref == "@" || strings.HasPrefix(ref, "-") || strings.HasPrefix(ref, "/") ||
		strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".") || strings.HasSuffix(ref, ".lock") ||
		strings.Contains(ref, "..") || strings.Contains(ref, "@{") || strings.Contains(ref, "//") {
		return false
	}
	for _, r := range ref {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return false
		}
	}
	for _, part := range strings.Split(ref, "/") {
		if strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}

func (v *validator) gitAuth(spec *StackSpec) {
	if spec.GitAuthSecret != "" {
		v.refName("gitAuthSecret", spec.GitAuthSecret)
	}
	a := spec.GitAuth
	if a == nil {
		return
	}
	if a.SSHAuth == nil && a.AccessToken == nil && a.GitHubApp == nil && a.BasicAuth == nil {
		v.errorf("gitAuth", "gitAuth must set one of sshAuth, accessToken, githubApp, basicAuth")
	}
	if a.SSHAuth != nil {
		v.ref("gitAuth.sshAuth.sshPrivateKey", a.SSHAuth.SSHPrivateKey, false)
		if a.SSHAuth.Password != nil {
			v.ref("gitAuth.sshAuth.password", *a.SSHAuth.Password, false)
		}
	}
	if a.AccessToken != nil {
		v.ref("gitAuth.accessToken", *a.AccessToken, false)
	}
	if g := a.GitHubApp; g != nil {
		v.ref("gitAuth.githubApp.appID", g.AppID, false)
		v.ref("gitAuth.githubApp.installationID", g.InstallationID, false)
		v.ref("gitAuth.githubApp.privateKey", g.PrivateKey, false)
	}
	if b := a.BasicAuth; b != nil {
		v.ref("gitAuth.basicAuth.userName", b.UserName, false)
		v.ref("gitAuth.basicAuth.password", b.Password, false)
	}
}

func (v *validator) configAndEnv(spec *StackSpec) {
	for _, k := range sortedKeys(spec.Config) {
		if k == "" {
			v.keyErrorf(joinPath("config", k), "empty config key")
		}
	}
	for _, k := range sortedKeys(spec.ConfigRef) {
		ref, rel := spec.ConfigRef[k], joinPath("configRef", k)
		v.refName(rel+".name", ref.Name)
		v.refKey(rel+".key", ref.Key)
	}
	for _, k := range sortedKeys(spec.SecretsRef) {
		v.ref(joinPath("secretsRef", k), spec.SecretsRef[k], true)
	}
	for _, k := range sortedKeys(spec.EnvRefs) {
		rel := joinPath("envRefs", k)
		if !envVarName.MatchString(k) {
			v.keyErrorf(rel, "not a valid environment variable name")
		}
		v.ref(rel, spec.EnvRefs[k], true)
		v.backendEnv(rel, k, spec.EnvRefs[k])
	}
	for i, name := range spec.Envs {
		v.refName(indexPath("envs", i), name)
	}
	for i, name := range spec.EnvSecrets {
		v.refName(indexPath("envSecrets", i), name)
	}
	if spec.AccessTokenSecret != "" {
		v.refName("accessTokenSecret", spec.AccessTokenSecret)
	}
	for i, env := range spec.Environment {
		if env == "" || strings.ContainsAny(env, " \t") {
			v.errorf(indexPath("environment", i), "not an ESC environment name (project/environment)")
		}
	}
}

// ref checks the form of a ResourceRef; what it points at is read only
// when the stack runs.
func (v *validator) ref(rel string, r ResourceRef, allowStackOutput bool) {
	selectors := map[string]bool{
		RefLiteral: r.Literal != nil, RefEnv: r.Env != nil, RefFS: r.Filesystem != nil,
		RefSecret: r.Secret != nil, RefStackOutput: r.StackOutput != nil,
	}
	switch {
	case r.Type == "":
		v.errorf(rel, "missing type (one of %s)", strings.Join(refTypeNames, ", "))
		return
	case !selectorKnown(r.Type):
		v.errorf(rel+".type", "unknown reference type %q (one of %s)", r.Type, strings.Join(refTypeNames, ", "))
		return
	case r.Type == RefStackOutput && !allowStackOutput:
		v.errorf(rel+".type", "StackOutput cannot be used here")
		return
	case !selectors[r.Type]:
		v.errorf(rel, "type %s needs its selector %s", r.Type, selectorField(r.Type))
		return
	}
	for typ, set := range selectors {
		if set && typ != r.Type {
			v.errorf(rel+"."+selectorField(typ), "selector does not match type %s", r.Type)
		}
	}
	switch r.Type {
	case RefEnv:
		if !envVarName.MatchString(r.Env.Name) {
			v.errorf(rel+".env.name", "not a valid environment variable name")
		}
	case RefFS:
		switch p := r.Filesystem.Path; {
		case p == "":
			v.errorf(rel+".filesystem.path", "missing path")
		case v.s != nil && v.s.Root != "" && !insideRoot(v.s.Root, v.s.Dir, p):
			v.errorf(rel+".filesystem.path", "a config from Git may read only files of its own repository: use a relative path that stays inside it")
		case v.s != nil && v.s.Root == "" && v.s.FromGit(rel):
			v.errorf(rel, "%v", errGitParamFile)
		}
	case RefSecret:
		v.refName(rel+".secret.name", r.Secret.Name)
		v.refKey(rel+".secret.key", r.Secret.Key)
	case RefStackOutput:
		v.stackOutput(stackOutputPath(rel, r), r.StackOutput)
	}
}

func selectorKnown(t string) bool {
	for _, n := range refTypeNames {
		if n == t {
			return true
		}
	}
	return false
}

func selectorField(t string) string {
	switch t {
	case RefFS:
		return "filesystem"
	case RefStackOutput:
		return "stackOutput"
	}
	return strings.ToLower(t)
}

// stackOutputPath is where a StackOutput's stack and output are written.
func stackOutputPath(rel string, r ResourceRef) string {
	if r.flat {
		return rel
	}
	return rel + ".stackOutput"
}

func (v *validator) stackOutput(rel string, so *StackOutputSelect) {
	switch {
	case so.Stack == "":
		v.errorf(rel+".stack", "missing stack")
	case so.Stack == v.s.Name:
		v.errorf(rel+".stack", "a stack cannot use its own outputs")
	case v.cfg.Stack(so.Stack) == nil:
		v.errorf(rel+".stack", "no stack named %q in the config", so.Stack)
	}
	if so.Output == "" {
		v.errorf(rel+".output", "missing output")
	}
}

// refName checks the name of a Secret or ConfigMap, which names a
// directory when it is read from disk.
func (v *validator) refName(rel, name string) {
	if msg := nameProblem(name, 253); msg != "" {
		v.errorf(rel, "%s", msg)
	}
}

// refKey checks a Secret or ConfigMap key, which names a file.
func (v *validator) refKey(rel, key string) {
	switch {
	case key == "":
		v.errorf(rel, "missing key")
	case key == "." || key == ".." || !dataKey.MatchString(key):
		v.errorf(rel, "invalid key %q: use letters, digits, '-', '_' and '.'", key)
	}
}

func (v *validator) prerequisites(spec *StackSpec) {
	for i, p := range spec.Prerequisites {
		rel := p.namePath(indexPath("prerequisites", i))
		switch {
		case p.Name == "":
			v.errorf(rel, "missing the prerequisite stack's name")
		case p.Name == v.s.Name:
			v.errorf(rel, "a stack cannot be its own prerequisite")
		case v.cfg.Stack(p.Name) == nil:
			v.errorf(rel, "no stack named %q in the config", p.Name)
		}
	}
}

func (v *validator) annotations(s *Stack) {
	if wave, ok := s.Annotations[AnnotationSyncWave]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(wave))
		if err != nil {
			v.annotationError(s, AnnotationSyncWave, "sync wave must be an integer")
		}
		s.SyncWave = n
	}
	if link, ok := s.Annotations[AnnotationExternalLink]; ok {
		u, err := url.Parse(link)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			v.annotationError(s, AnnotationExternalLink, "external link must be an http(s) URL")
		}
	}
}

func (v *validator) annotationError(s *Stack, key, msg string) {
	base := "metadata.annotations"
	if s.base != "spec" {
		base = s.base + ".annotations"
	}
	full := base + "." + key
	v.diags = append(v.diags, Diagnostic{Pos: v.at(full), Path: full, Msg: msg})
}

// edge is a dependency of one stack on another: a prerequisite or a
// StackOutput reference. Both order updates.
type edge struct {
	to  string
	rel string // where the dependency is written, relative to the spec
}

// Dependencies returns the names of the stacks s depends on: its
// prerequisites and the stacks whose outputs it reads, sorted.
func (s *Stack) Dependencies() []string {
	var names []string
	seen := map[string]bool{}
	for _, e := range s.edges() {
		if !seen[e.to] {
			seen[e.to] = true
			names = append(names, e.to)
		}
	}
	sort.Strings(names)
	return names
}

func (s *Stack) edges() []edge {
	var out []edge
	for i, p := range s.Spec.Prerequisites {
		out = append(out, edge{p.Name, p.namePath(indexPath("prerequisites", i))})
	}
	for _, refs := range []struct {
		field string
		m     map[string]ResourceRef
	}{{"envRefs", s.Spec.EnvRefs}, {"secretsRef", s.Spec.SecretsRef}} {
		for _, k := range sortedKeys(refs.m) {
			if so := refs.m[k].StackOutput; so != nil && refs.m[k].Type == RefStackOutput {
				out = append(out, edge{so.Stack, stackOutputPath(joinPath(refs.field, k), refs.m[k]) + ".stack"})
			}
		}
	}
	return out
}

// cycles reports every dependency cycle once, at the edge that closes it.
func (v *validator) cycles() {
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	var trail []string
	var visit func(s *Stack)
	visit = func(s *Stack) {
		state[s.Name] = active
		trail = append(trail, s.Name)
		for _, e := range s.edges() {
			next := v.cfg.Stack(e.to)
			switch {
			case next == nil || e.to == s.Name:
				// reported by the reference checks
			case state[e.to] == active:
				start := indexOf(trail, e.to)
				cycle := append(append([]string(nil), trail[start:]...), e.to)
				v.s = s
				v.errorf(e.rel, "dependency cycle: %s", strings.Join(cycle, " → "))
			case state[e.to] == unvisited:
				visit(next)
			}
		}
		trail = trail[:len(trail)-1]
		state[s.Name] = done
	}
	for _, s := range v.cfg.Stacks {
		if state[s.Name] == unvisited {
			visit(s)
		}
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (v *validator) driftDetection(dd *DriftDetection) {
	if dd == nil {
		return
	}
	if dd.Schedule != "" {
		if dd.Interval.Duration > 0 {
			v.errorf("driftDetection", "set interval or schedule, not both")
		} else if _, err := ParseCron(dd.Schedule); err != nil {
			v.errorf("driftDetection.schedule", "%v", err)
		}
	}
	for i, rule := range dd.Ignore {
		rel := indexPath("driftDetection.ignore", i)
		if rule.URN == "" && rule.Type == "" {
			v.errorf(rel, "an ignore rule needs urn or type")
		}
		v.nonEmpty(rel+".properties", rule.Properties)
	}
}

func (v *validator) reviewStacks(spec *StackSpec) {
	rs := spec.ReviewStacks
	if rs == nil {
		return
	}
	if rs.Max < 0 {
		v.errorf("reviewStacks.max", "must not be negative")
	}
	if rs.Enabled && spec.Preview {
		v.errorf("reviewStacks.enabled", "a stack with preview: true changes nothing, so it cannot deploy review stacks")
	}
	v.reviewOverrides(spec)
}

// reviewOverrides checks reviewStacks.config, secretsRef and envRefs as
// config, secretsRef and envRefs are checked, and what ForReview would
// refuse: a template's secret made plain, an unknown placeholder.
func (v *validator) reviewOverrides(spec *StackSpec) {
	rs := spec.ReviewStacks
	sample := map[string]string{PlaceholderPRNumber: "1", PlaceholderReviewStack: "review"}
	for _, k := range sortedKeys(rs.Config) {
		rel := joinPath("reviewStacks.config", k)
		switch _, both := rs.SecretsRef[k]; {
		case k == "":
			v.keyErrorf(rel, "empty config key")
			continue
		case both:
			v.keyErrorf(rel, "set the key in reviewStacks.config or in reviewStacks.secretsRef, not both")
			continue
		}
		if msg := secretClash(spec, k); msg != "" {
			v.keyErrorf(rel, "%s", msg)
			continue
		}
		var fe *FieldError
		if _, err := ExpandPlaceholders(rs.Config[k], rel, sample); errors.As(err, &fe) {
			v.errorf(fe.Path, "%v", fe.Err)
		}
	}
	for _, k := range sortedKeys(rs.SecretsRef) {
		rel := joinPath("reviewStacks.secretsRef", k)
		if k == "" {
			v.keyErrorf(rel, "empty config key")
			continue
		}
		v.ref(rel, rs.SecretsRef[k], true)
	}
	for _, k := range sortedKeys(rs.EnvRefs) {
		rel := joinPath("reviewStacks.envRefs", k)
		if !envVarName.MatchString(k) {
			v.keyErrorf(rel, "not a valid environment variable name")
		}
		v.ref(rel, rs.EnvRefs[k], true)
		v.backendEnv(rel, k, rs.EnvRefs[k])
	}
}

// insideRoot says whether path, relative to dir, names a file below root;
// an absolute path never does.
func insideRoot(root, dir, path string) bool {
	if filepath.IsAbs(path) {
		return false
	}
	rel, err := filepath.Rel(root, filepath.Join(dir, path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// IsFullSHA says whether s is a full SHA-1 or SHA-256 commit name.
func IsFullSHA(s string) bool { return fullSHA.MatchString(s) }

// fluxSource resolves spec.fluxSource into the stack's source: the URL,
// ref and credentials of the Flux GitRepository it names, and its dir as
// repoDir, as PKO with Flux would fetch them.
func (v *validator) fluxSource(spec *StackSpec) {
	fs := spec.FluxSource
	if fs == nil {
		return
	}
	ref := fs.SourceRef
	repo := v.cfg.GitRepositories[ref.Name]
	switch {
	case spec.ProjectRepo != "" || spec.ProgramRef != nil:
		v.errorf("fluxSource", "set one of fluxSource, projectRepo and programRef")
		return
	case ref.Kind != "GitRepository":
		v.errorf("fluxSource.sourceRef.kind", "a Flux %s is not a source stackd reads: it reads Flux GitRepository documents (source.toolkit.fluxcd.io v1 or v1beta2) of the config",
			cmp.Or(ref.Kind, "source without a kind"))
		return
	case repo == nil:
		v.errorf("fluxSource.sourceRef.name", "no Flux GitRepository named %q in the config", ref.Name)
		return
	}
	r := repo.Ref
	if r != nil && r.Commit == "" && r.Name == "" && r.SemVer != "" {
		if _, err := ParseSemverRange(r.SemVer); err != nil {
			v.errorf("fluxSource.sourceRef.name", "Flux GitRepository %q: %v", ref.Name, err)
			return
		}
	}
	spec.ProjectRepo, spec.RepoDir = repo.URL, cmp.Or(spec.RepoDir, fs.Dir)
	switch {
	case r == nil:
		spec.Branch = "master" // Flux's default
	case r.Commit != "":
		spec.Commit = r.Commit
	case r.Name != "":
		spec.Branch = r.Name
	case r.SemVer != "":
		spec.Branch = SemverPrefix + r.SemVer
	case r.Tag != "":
		spec.Branch = "refs/tags/" + r.Tag
	default:
		spec.Branch = cmp.Or(r.Branch, "master")
	}
	if repo.SecretRef != nil && spec.GitAuth == nil && spec.GitAuthSecret == "" {
		spec.GitAuthSecret = repo.SecretRef.Name
	}
}

// workspaceVolumes notes a file:// backend, or an env value, under a path
// that workspaceTemplate mounts into PKO's workspace pod: stackd ignores
// workspaceTemplate, so the path is one of stackd's own machine. The
// value itself is not quoted: a literal may be a secret.
func (v *validator) workspaceVolumes(spec *StackSpec) {
	mounts := mountPaths(spec.WorkspaceTemplate.node)
	check := func(rel, path string) {
		for _, m := range mounts {
			if path == m || strings.HasPrefix(path, strings.TrimSuffix(m, "/")+"/") {
				v.notef(rel, "a path in %s, which workspaceTemplate mounts into PKO's workspace pod; stackd ignores workspaceTemplate: the path is on stackd's machine", m)
				return
			}
		}
	}
	if p, ok := strings.CutPrefix(spec.Backend, "file://"); ok && len(mounts) > 0 {
		check("backend", p)
	}
	for _, name := range sortedKeys(spec.EnvRefs) {
		if r := spec.EnvRefs[name]; r.Type == RefLiteral && r.Literal != nil && len(mounts) > 0 {
			check("envRefs."+name, r.Literal.Value)
		}
	}
}

// mountPaths are the values of every mountPath key under n.
func mountPaths(n *yaml.Node) []string {
	if n == nil {
		return nil
	}
	var out []string
	for i, c := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 1 && n.Content[i-1].Value == "mountPath" && c.Kind == yaml.ScalarNode {
			out = append(out, c.Value)
		}
		out = append(out, mountPaths(c)...)
	}
	return out
}
