package spec

import (
	"time"

	"gopkg.in/yaml.v3"
)

// StackSpec is PKO's Stack spec, field for field (see the configuration
// reference). Struct tags drive the strict decoder in decode.go:
//
//	stackd:"k8s"         Kubernetes-only: parsed, ignored, reported
//	stackd:"deprecated"  deprecated in PKO v2 but still honoured, reported
//	stackd:"noop"        accepted and ignored, as PKO v2 does, reported
//	stackd:"why=REASON"  accepted and ignored, reported with REASON
//	stackd:"alias=NAME"  also accepted under NAME (but not both at once)
type StackSpec struct {
	// Stack is the Pulumi stack name: "stack", "org/stack" or "org/project/stack".
	Stack   string `yaml:"stack"`
	Backend string `yaml:"backend"`

	// Source: projectRepo (with branch xor commit) or programRef.
	ProjectRepo   string            `yaml:"projectRepo"`
	RepoDir       string            `yaml:"repoDir"`
	Branch        string            `yaml:"branch"`
	Commit        string            `yaml:"commit"`
	Shallow       bool              `yaml:"shallow"`
	GitAuth       *GitAuthConfig    `yaml:"gitAuth"`
	GitAuthSecret string            `yaml:"gitAuthSecret" stackd:"deprecated"`
	ProgramRef    *ProgramReference `yaml:"programRef"`
	FluxSource    *FluxSource       `yaml:"fluxSource"`

	// Configuration and environment.
	Config            map[string]any          `yaml:"config"`
	ConfigRef         map[string]ConfigMapRef `yaml:"configRef" stackd:"alias=configRefs"`
	Secrets           map[string]string       `yaml:"secrets" stackd:"deprecated"`
	SecretsRef        map[string]ResourceRef  `yaml:"secretsRef"`
	SecretsProvider   string                  `yaml:"secretsProvider"`
	EnvRefs           map[string]ResourceRef  `yaml:"envRefs"`
	Envs              []string                `yaml:"envs" stackd:"deprecated"`
	EnvSecrets        []string                `yaml:"envSecrets" stackd:"deprecated"`
	AccessTokenSecret string                  `yaml:"accessTokenSecret" stackd:"deprecated"`
	Environment       []string                `yaml:"environment"`

	// Operations.
	Targets                        []string        `yaml:"targets"`
	TargetDependents               bool            `yaml:"targetDependents"`
	Refresh                        bool            `yaml:"refresh"`
	Preview                        bool            `yaml:"preview"`
	DestroyOnFinalize              bool            `yaml:"destroyOnFinalize"`
	RunProgram                     bool            `yaml:"runProgram"`
	UseLocalStackOnly              bool            `yaml:"useLocalStackOnly"`
	ContinueResyncOnCommitMatch    bool            `yaml:"continueResyncOnCommitMatch"`
	ResyncFrequencySeconds         int64           `yaml:"resyncFrequencySeconds"`
	RetryMaxBackoffDurationSeconds int64           `yaml:"retryMaxBackoffDurationSeconds"`
	Prerequisites                  []Prerequisite  `yaml:"prerequisites"`
	UpdateTemplate                 *UpdateTemplate `yaml:"updateTemplate"`

	// stackd's extensions.
	//
	// OperationTimeout bounds each operation of the stack instead of the
	// daemon's --operation-timeout.
	OperationTimeout Duration `yaml:"operationTimeout"`
	// DriftDetection checks the deployed stack for changes made outside
	// Pulumi.
	DriftDetection *DriftDetection `yaml:"driftDetection"`
	// Paths are globs of files, relative to the repository root, that a
	// new commit must change for the stack to run ("**" matches any
	// number of directories). Default: repoDir's files, and for a
	// project at the root, every file.
	Paths []string `yaml:"paths"`
	// Project, when set, is the Pulumi project the stack's program must
	// name (Pulumi.yaml name:); a program that names another is refused.
	// It is how a person confirms that a stack's project changes: the
	// program's own name is its committers' to choose, and a new project
	// is another Pulumi stack. stackd's own field, not PKO's.
	Project string `yaml:"project"`
	// Approval makes the stack's updates wait for a person's approval of
	// the plan a preview saved: every update that changes something, or
	// those beyond a change budget (see Approval). Nil takes the
	// daemon's --approval.
	Approval *Approval `yaml:"approval"`
	// Credentials give the stack's operations cloud identities of their
	// own: short-lived tokens stackd signs (see Credentials).
	Credentials *Credentials `yaml:"credentials"`
	// ReviewStacks makes the stack a template: each pull request that
	// touches it gets a stack of its own, deployed at its head commit and
	// destroyed when it closes or goes quiet.
	ReviewStacks *ReviewStacks `yaml:"reviewStacks"`

	// Accepted and ignored by PKO v2 itself.
	ExpectNoRefreshChanges bool `yaml:"expectNoRefreshChanges" stackd:"noop"`
	RetryOnUpdateConflict  bool `yaml:"retryOnUpdateConflict" stackd:"noop"`

	// Kubernetes-only.
	ServiceAccountName     Ignored `yaml:"serviceAccountName" stackd:"k8s"`
	WorkspaceTemplate      Ignored `yaml:"workspaceTemplate" stackd:"k8s"`
	WorkspaceReclaimPolicy Ignored `yaml:"workspaceReclaimPolicy" stackd:"k8s"`

	// overrides are a review stack's config values, placeholders expanded
	// (see Stack.ForReview); never decoded.
	overrides *ReviewStacks
}

// ResourceRef is PKO's reference to a value, with stackd's standalone
// meaning of each type:
//
//	Literal      the value itself
//	Env          an environment variable of the daemon
//	FS           a file (relative paths start at the config file's directory)
//	Secret       the file <secrets-dir>/<name>/<key>, or a Secret document
//	StackOutput  an output of another stack of the same config
//
// A StackOutput is written either with the selector stackOutput: {stack,
// output} or, as the Argo CD guide shows it, with stack and output beside
// type; decoding turns the second form into the first.
type ResourceRef struct {
	Type        string             `yaml:"type"`
	Literal     *LiteralRef        `yaml:"literal"`
	Env         *EnvSelector       `yaml:"env"`
	Filesystem  *FSSelector        `yaml:"filesystem"`
	Secret      *SecretSelector    `yaml:"secret"`
	StackOutput *StackOutputSelect `yaml:"stackOutput"`

	// flat is set when the StackOutput was written in the guide's form.
	flat bool
}

// ResourceRef types.
const (
	RefLiteral     = "Literal"
	RefEnv         = "Env"
	RefFS          = "FS"
	RefSecret      = "Secret"
	RefStackOutput = "StackOutput"
)

// LiteralRef holds a value written in the config. Its Value may be a
// secret: it never appears in messages.
type LiteralRef struct {
	Value string `yaml:"value"`
}

// EnvSelector names an environment variable of the daemon.
type EnvSelector struct {
	Name string `yaml:"name"`
}

// FSSelector names a file.
type FSSelector struct {
	Path string `yaml:"path"`
}

// SecretSelector names a key of a Kubernetes-style secret.
type SecretSelector struct {
	Name      string  `yaml:"name"`
	Key       string  `yaml:"key"`
	Namespace Ignored `yaml:"namespace" stackd:"k8s"`
}

// StackOutputSelect names an output of another stack.
type StackOutputSelect struct {
	Stack  string `yaml:"stack"`
	Output string `yaml:"output"`
}

// ConfigMapRef takes a config value from a ConfigMap key: the file
// <configmaps-dir>/<name>/<key>, or a ConfigMap document of the config.
type ConfigMapRef struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
	// JSON parses the value as JSON (structured config).
	JSON bool `yaml:"json"`
}

// GitAuthConfig holds the credentials of projectRepo. When several forms
// are set, PKO's precedence applies: sshAuth, accessToken, githubApp,
// basicAuth.
type GitAuthConfig struct {
	SSHAuth     *SSHAuth       `yaml:"sshAuth"`
	AccessToken *ResourceRef   `yaml:"accessToken"`
	GitHubApp   *GitHubAppAuth `yaml:"githubApp"`
	BasicAuth   *BasicAuth     `yaml:"basicAuth"`
}

// FluxSource names a Flux source, as PKO's fluxSource does: stackd reads
// the Flux GitRepository documents of the config (see GitRepository).
type FluxSource struct {
	SourceRef FluxSourceRef `yaml:"sourceRef"`
	// Dir is the project's directory in the source: the stack's repoDir.
	Dir string `yaml:"dir"`
}

// FluxSourceRef is a reference to a Flux source object.
type FluxSourceRef struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Name       string `yaml:"name"`
}

// GitRepository is what stackd reads of a Flux GitRepository document
// (source.toolkit.fluxcd.io v1 or v1beta2): where the repository is,
// which ref to follow, and the Secret holding its credentials (Flux's
// keys: username and password, bearerToken, or identity with
// known_hosts).
type GitRepository struct {
	URL       string       `yaml:"url"`
	Ref       *GitRepoRef  `yaml:"ref"`
	SecretRef *LocalObjRef `yaml:"secretRef"`
	Interval  Ignored      `yaml:"interval" stackd:"why=stackd polls at the stacks' resyncFrequencySeconds"`
	Timeout   Ignored      `yaml:"timeout" stackd:"why=stackd's --git-timeout bounds every Git call"`
	Provider  Ignored      `yaml:"provider" stackd:"why=credentials come from secretRef"`
	Others    fluxIgnored  `yaml:",inline"`
}

// fluxIgnored are GitRepository fields of Flux's own machinery.
type fluxIgnored struct {
	Suspend           Ignored `yaml:"suspend" stackd:"k8s"`
	Ignore            Ignored `yaml:"ignore" stackd:"why=stackd checks out the whole commit"`
	Include           Ignored `yaml:"include" stackd:"why=stackd checks out the whole commit"`
	RecurseSubmodules Ignored `yaml:"recurseSubmodules" stackd:"why=stackd does not fetch submodules"`
	Verify            Ignored `yaml:"verify" stackd:"why=stackd does not verify commit signatures"`
	ProxySecretRef    Ignored `yaml:"proxySecretRef" stackd:"k8s"`
	SparseCheckout    Ignored `yaml:"sparseCheckout" stackd:"why=stackd checks out the whole commit"`
	GitImplementation Ignored `yaml:"gitImplementation" stackd:"k8s"`
	AccessFrom        Ignored `yaml:"accessFrom" stackd:"k8s"`
}

// GitRepoRef is a Flux GitRepository's ref: one of commit, name, tag,
// semver, branch (in Flux's order of precedence); master without any.
type GitRepoRef struct {
	Branch string `yaml:"branch"`
	Tag    string `yaml:"tag"`
	SemVer string `yaml:"semver"`
	Name   string `yaml:"name"`
	Commit string `yaml:"commit"`
}

// LocalObjRef names an object of the same config.
type LocalObjRef struct {
	Name string `yaml:"name"`
}

// SSHAuth is a private key with an optional passphrase.
type SSHAuth struct {
	SSHPrivateKey ResourceRef  `yaml:"sshPrivateKey"`
	Password      *ResourceRef `yaml:"password"`
}

// BasicAuth is a user name and password.
type BasicAuth struct {
	UserName ResourceRef `yaml:"userName"`
	Password ResourceRef `yaml:"password"`
}

// GitHubAppAuth authenticates as a GitHub App installation.
type GitHubAppAuth struct {
	AppID          ResourceRef `yaml:"appID"`
	InstallationID ResourceRef `yaml:"installationID"`
	PrivateKey     ResourceRef `yaml:"privateKey"`
}

// ProgramReference names a Program of the same config.
type ProgramReference struct {
	Name string `yaml:"name"`
}

// Prerequisite gates a stack's updates on another stack. Two shapes are
// accepted: PKO's {name, requirement: {succeededWithinDuration}} and the
// {type: Stack, requirement: NAME, succeededWithinDuration} shape of the
// Argo CD guide; both decode to this struct (see decodeYAML).
type Prerequisite struct {
	Name        string
	Requirement *Requirement

	// argoShape is set for the {type: Stack, requirement: NAME} shape.
	argoShape bool
}

// namePath is where the prerequisite's name is written, below path.
func (p Prerequisite) namePath(path string) string {
	if p.argoShape {
		return path + ".requirement"
	}
	return path + ".name"
}

// Requirement says how fresh a prerequisite's last success must be.
type Requirement struct {
	// SucceededWithinDuration, when set, is how long ago the last success
	// may be; 0s makes the prerequisite always stale, as in PKO.
	SucceededWithinDuration *Duration `yaml:"succeededWithinDuration"`
}

// UpdateTemplate is PKO's patch onto each update it creates: every field
// of PKO's Update object is accepted; those of the Kubernetes object and
// of PKO's own wiring have no meaning here and are reported as ignored.
type UpdateTemplate struct {
	APIVersion Ignored     `yaml:"apiVersion" stackd:"k8s"`
	Kind       Ignored     `yaml:"kind" stackd:"k8s"`
	Metadata   Ignored     `yaml:"metadata" stackd:"k8s"`
	Spec       *UpdateSpec `yaml:"spec"`
	Status     Ignored     `yaml:"status" stackd:"k8s"`
}

// UpdateSpec holds the operation options an updateTemplate may set.
type UpdateSpec struct {
	WorkspaceName     Ignored  `yaml:"workspaceName" stackd:"why=stackd runs each operation in a sandboxed process of its own, with no PKO Workspace to name"`
	StackName         Ignored  `yaml:"stackName" stackd:"why=the stack's own spec.stack is the Pulumi stack every operation selects"`
	Type              Ignored  `yaml:"type" stackd:"why=stackd picks each operation's type (up, preview, refresh, destroy) from the stack's state, as PKO's Stack controller does"`
	TTLAfterCompleted Ignored  `yaml:"ttlAfterCompleted" stackd:"k8s"`
	Parallel          int64    `yaml:"parallel"`
	Message           string   `yaml:"message"`
	ExpectNoChanges   bool     `yaml:"expectNoChanges"`
	Replace           []string `yaml:"replace"`
	Target            []string `yaml:"target"`
	TargetDependents  bool     `yaml:"targetDependents"`
	Refresh           bool     `yaml:"refresh"`
	ContinueOnError   bool     `yaml:"continueOnError"`
	Remove            bool     `yaml:"remove"`
	RunProgram        bool     `yaml:"runProgram"`
}

// ProgramSpec is the body of a PKO Program: a Pulumi YAML program.
type ProgramSpec struct {
	Configuration map[string]ProgramConfig `yaml:"configuration"`
	Resources     map[string]Resource      `yaml:"resources"`
	Variables     map[string]any           `yaml:"variables"`
	Outputs       map[string]any           `yaml:"outputs"`
	Packages      map[string]string        `yaml:"packages"`
}

// ProgramConfig declares one config value of a Program.
type ProgramConfig struct {
	Type    string `yaml:"type"`
	Default any    `yaml:"default"`
}

// Resource is one resource of a Program.
type Resource struct {
	Type       string           `yaml:"type"`
	Properties map[string]any   `yaml:"properties"`
	Options    *ResourceOptions `yaml:"options"`
	Get        *ResourceGetter  `yaml:"get"`
}

// ResourceOptions are Pulumi YAML resource options. Values are expressions,
// kept as written.
type ResourceOptions struct {
	AdditionalSecretOutputs any `yaml:"additionalSecretOutputs"`
	Aliases                 any `yaml:"aliases"`
	CustomTimeouts          any `yaml:"customTimeouts"`
	DeleteBeforeReplace     any `yaml:"deleteBeforeReplace"`
	DependsOn               any `yaml:"dependsOn"`
	IgnoreChanges           any `yaml:"ignoreChanges"`
	Import                  any `yaml:"import"`
	Parent                  any `yaml:"parent"`
	Protect                 any `yaml:"protect"`
	Provider                any `yaml:"provider"`
	Providers               any `yaml:"providers"`
	Version                 any `yaml:"version"`
	PluginDownloadURL       any `yaml:"pluginDownloadURL"`
	ReplaceOnChanges        any `yaml:"replaceOnChanges"`
	RetainOnDelete          any `yaml:"retainOnDelete"`
	DeletedWith             any `yaml:"deletedWith"`
	HideDiffs               any `yaml:"hideDiffs"`
	ReplaceWith             any `yaml:"replaceWith"`
}

// ResourceGetter reads an existing resource instead of managing one.
type ResourceGetter struct {
	ID    any            `yaml:"id"`
	State map[string]any `yaml:"state"`
}

// Duration is a Go duration written as a string ("90s", "1h30m"), like
// Kubernetes' metav1.Duration. Negative durations are rejected.
type Duration struct {
	time.Duration
}

// Ignored holds a Kubernetes-only value: it is parsed, never used.
type Ignored struct {
	node *yaml.Node
}

// Set reports whether the field was present.
func (i Ignored) Set() bool { return i.node != nil }

// ReviewStacks configures the review stacks of a template stack: one per
// pull request that touches the stack, named "<stack>-pr-<number>" (its
// Pulumi stack name too), with the template's program at the pull
// request's head commit and the template's config and environment,
// overridden by Config, SecretsRef and EnvRefs (see Stack.ForReview).
type ReviewStacks struct {
	Enabled bool `yaml:"enabled"`
	// TTL is how long a review stack lives after the last activity on its
	// pull request; zero means 72h.
	TTL Duration `yaml:"ttl"`
	// Max bounds the review stacks of this template; zero for no bound
	// of its own (the daemon's bounds still apply).
	Max int `yaml:"max"`
	// Config holds config values, written as the stack's config, that the
	// review stacks take in place of the template's value of the same key
	// (config or configRef), or in addition. Their strings may hold the
	// placeholders ${prNumber} and ${reviewStack} (see Placeholders).
	Config map[string]any `yaml:"config"`
	// SecretsRef holds secret config values, written and resolved as the
	// stack's secretsRef, that the review stacks take in place of the
	// template's value of the same key, or in addition.
	SecretsRef map[string]ResourceRef `yaml:"secretsRef"`
	// EnvRefs holds environment variables, written and resolved as the
	// stack's envRefs, that the review stacks get in place of the
	// template's variable of the same name, or in addition.
	EnvRefs map[string]ResourceRef `yaml:"envRefs"`
}

// DriftDetection configures drift checks: a refresh preview of the last
// applied commit, which never changes the state or the resources.
type DriftDetection struct {
	// Interval between checks; zero takes the daemon's --drift-interval.
	Interval Duration `yaml:"interval"`
	// Schedule is a 5-field cron expression (UTC) instead of an interval.
	Schedule string `yaml:"schedule"`
	// Remediate runs an up (with refresh) after a check found drift.
	Remediate bool `yaml:"remediate"`
	// Ignore lists drift that is accepted.
	Ignore []DriftIgnore `yaml:"ignore"`
}

// DriftIgnore accepts drift of the resources it matches: by URN glob ("*"
// matches anything) and/or resource type, optionally only of the named
// properties.
type DriftIgnore struct {
	URN        string   `yaml:"urn"`
	Type       string   `yaml:"type"`
	Properties []string `yaml:"properties"`
}
