package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/notify"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/fleet"
	"github.com/stackd/stackd/gitwatch"
	"github.com/stackd/stackd/identity"
	"github.com/stackd/stackd/preview"
	"github.com/stackd/stackd/runner"
	"github.com/stackd/stackd/sandbox"
	"github.com/stackd/stackd/store"
	"github.com/stackd/stackd/web"
	"github.com/stackd/stackd/web/metrics"
)

// runFlags are the flags of "stackd run".
type runFlags struct {
	sourceFlags
	clusterFlags
	forgeFlags
	limitFlags
	accessFlags
	tlsFlags
	auditFlags
	policyFlags
	hostPathFlags
	oidcFlags
	dataDir   string
	listen    string
	pulumiBin string
	backend   string
	// secretsPassphraseFile holds the passphrase of the default secrets
	// provider.
	secretsPassphraseFile string
	secretsDir            string
	configMapsDir         string
	maxConcurrent         int
	maxFailures           int64
	minResync             time.Duration
	retryBackoff          time.Duration
	opTimeout             time.Duration
	gitTimeout            time.Duration
	shutdownGrace         time.Duration
	watchConfig           bool
	massRemoval           bool
	driftInterval         time.Duration
	approval              string
	logLevel              string
	logFormat             string
	tokenFile             string
	readToken             bool
	noToken               bool
	webhookFile           string
	notifyURLs            stringsFlag
	notifySlack           stringsFlag
	notifySecret          string
	notifyURLFiles        stringsFlag
	notifySlackFiles      stringsFlag
	allowedHosts          stringsFlag
	envRefAllow           stringsFlag
	passEnv               stringsFlag
	envFiles              stringsFlag
	installTimeout        time.Duration
	pulumiGOGC            int
	sandboxFlags
}

// stringsFlag is a repeatable string flag: each use adds one value. Its
// environment variable holds a single value.
type stringsFlag []string

func (s *stringsFlag) String() string {
	if s == nil {
		return ""
	}
	return strings.Join(*s, ",")
}

func (s *stringsFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

func (f *runFlags) define(fs *flag.FlagSet) {
	f.sourceFlags.define(fs)
	f.clusterFlags.define(fs)
	f.forgeFlags.define(fs)
	f.sandboxFlags.define(fs)
	f.limitFlags.define(fs)
	f.accessFlags.define(fs)
	f.tlsFlags.define(fs)
	f.auditFlags.define(fs)
	f.policyFlags.define(fs)
	f.hostPathFlags.define(fs)
	f.oidcFlags.define(fs)
	fs.StringVar(&f.dataDir, "data-dir", defaultDataDir, "directory for state, checkouts and the default backend")
	fs.StringVar(&f.listen, "listen", web.DefaultAddr, "HTTP listen address")
	fs.StringVar(&f.pulumiBin, "pulumi-bin", "", "directory holding the pulumi CLI (default: beside stackd, else on PATH)")
	fs.StringVar(&f.backend, "default-backend", "", "backend URL of stacks without spec.backend (default: a file backend in the data dir)")
	fs.StringVar(&f.secretsPassphraseFile, "passphrase-file", "", "file holding the passphrase of the default secrets provider (default: generated once into the data dir)")
	fs.Var(&f.passEnv, "pass-env", "daemon environment variable `NAME` (glob, e.g. AWS_*) every program inherits (repeatable)")
	fs.Var(&f.envFiles, "env-file", "`FILE` of NAME=value lines set for every program (repeatable)")
	fs.Var(&f.envRefAllow, "env-ref-allow", "environment variable `NAME` (glob) that Env references of a config from Git may read (repeatable; default: none)")
	fs.StringVar(&f.secretsDir, "secrets-dir", "", "directory of Secret references, as <name>/<key> files")
	fs.StringVar(&f.configMapsDir, "configmaps-dir", "", "directory of configRef values, as <name>/<key> files")
	fs.IntVar(&f.maxConcurrent, "max-concurrent", defaultConcurrency(), "operations running at once (default: one per core, at least 2)")
	fs.Int64Var(&f.maxFailures, "max-failures", decide.DefaultMaxFailures, "consecutive failures after which a stack stalls")
	fs.DurationVar(&f.minResync, "min-resync-interval", decide.DefaultResync, "floor of every stack's resync and branch-poll period")
	fs.DurationVar(&f.retryBackoff, "retry-backoff", 10*time.Second, "first retry delay after a failure; each further one triples it")
	fs.DurationVar(&f.opTimeout, "operation-timeout", time.Hour, "time limit of one pulumi operation")
	fs.DurationVar(&f.installTimeout, "install-timeout", runner.DefaultInstallTimeout, "time limit of one `pulumi install` (run when a program's dependency files change)")
	fs.IntVar(&f.pulumiGOGC, "pulumi-gogc", runner.DefaultEngineGOGC, "GOGC of the pulumi CLI (not its plugins) on stacks whose state is at most 256 KiB, with GOMEMLIMIT=512MiB: fewer collections at start-up, a few MB more memory (0: Go's default)")
	fs.DurationVar(&f.gitTimeout, "git-timeout", gitwatch.DefaultTimeout, "time limit of one git network call")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", 10*time.Minute, "on stop, how long running operations may finish before they are interrupted")
	fs.BoolVar(&f.watchConfig, "watch-config", true, "reload the config when its files change")
	fs.BoolVar(&f.massRemoval, "allow-mass-removal", false, "let a reload remove all stacks, or more than half of them")
	fs.StringVar(&f.approval, "approval", "off", "approval of stacks whose spec sets none: off, required, or a budget such as '{when: [delete, replace], maxChanges: 20}'")
	fs.DurationVar(&f.driftInterval, "drift-interval", 0, "check every deployed stack for drift this often, unless its driftDetection says otherwise (0: off)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&f.tokenFile, "api-token-file", "", "file holding the bearer token that mutating API requests need (default: generated once into <data-dir>/"+apiTokenFile+")")
	fs.BoolVar(&f.readToken, "api-read-requires-token", false, "require the token for reads too (the web UI then needs it as well)")
	fs.BoolVar(&f.noToken, "api-no-token", false, "let mutating API requests through without a token: every local user can sync, reload, pause and back up")
	fs.Var(&f.allowedHosts, "allowed-host", "host `NAME` (glob) the API answers for besides IP addresses, localhost and the listen address (repeatable)")
	fs.StringVar(&f.webhookFile, "webhook-secret-file", "", "file holding the secret that signs Git push webhooks (unset: no webhooks)")
	fs.Var(&f.notifyURLs, "notify-url", "webhook `URL` that receives stack events as JSON (repeatable)")
	fs.Var(&f.notifySlack, "notify-slack-url", "Slack-compatible incoming webhook `URL` that receives stack events (repeatable)")
	fs.Var(&f.notifyURLFiles, "notify-url-file", "`FILE` holding a --notify-url, kept out of argv (repeatable)")
	fs.Var(&f.notifySlackFiles, "notify-slack-url-file", "`FILE` holding a --notify-slack-url, kept out of argv (repeatable)")
	fs.StringVar(&f.notifySecret, "notify-secret-file", "", "file holding the secret that signs --notify-url requests (X-Stackd-Signature)")
}

// runDaemon runs the daemon until ctx ends.
func runDaemon(ctx context.Context, args []string, stderr io.Writer) error {
	var f runFlags
	fs := newFlagSet("run")
	f.define(fs)
	if err := parseFlags(fs, "run --config PATH [flags]", args, stderr); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
		return usageErrorf("run: unexpected argument %q", fs.Arg(0))
	case len(f.config) == 0:
		return usageErrorf("run: --config is required")
	}
	if err := f.checkAPIToken(); err != nil {
		return err
	}
	if err := f.tlsFlags.check(f.advertise); err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	return serve(ctx, &f, log)
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErrorf("run: --log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageErrorf("run: --log-format must be text or json")
}

// serve runs the daemon until ctx ends, then stops it.
func serve(ctx context.Context, f *runFlags, log *slog.Logger) error {
	sd := newNotifier()
	f.adoptOrphans = true
	a, err := start(ctx, f, log)
	if err != nil {
		return err
	}
	// SIGHUP is caught before systemd hears READY=1: a reload asked for
	// at once must not meet the signal's default action, which ends the
	// process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := sd.send("READY=1\nSTATUS=reconciling"); err != nil {
		log.Warn("cannot notify systemd", "err", err)
	}
	watchCtx, stopWatchdog := context.WithCancel(context.Background())
	defer stopWatchdog()
	go sd.watchdog(watchCtx)
	for {
		select {
		case <-hup:
			_ = sd.send(reloading())
			_ = a.d.Reload() // logged; the config in force stays on error
			_ = sd.send("READY=1")
		case <-ctx.Done():
			_ = sd.send("STOPPING=1")
			err := a.stop(graceUntilSecondSignal(f.shutdownGrace, log))
			if err != nil {
				log.Error("stopped with errors", "err", err)
				return err
			}
			log.Info("stackd stopped")
			return nil
		}
	}
}

// graceUntilSecondSignal is the shutdown grace: it ends after grace, or at
// once when a second SIGINT or SIGTERM comes.
func graceUntilSecondSignal(grace time.Duration, log *slog.Logger) context.Context {
	log.Info("stopping; running operations may finish", "grace", grace)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	go func() {
		defer signal.Stop(again)
		select {
		case <-again:
			log.Warn("second signal: interrupting running operations now")
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx
}

// notifyGrace is how long stop waits for queued notifications.
const notifyGrace = 10 * time.Second

// app is a running daemon: its HTTP server, reconcile loop and store.
type app struct {
	srv *web.Server
	d   *daemon.Daemon
	// previews runs the previews of pull requests; nil without --forge.
	previews *preview.Previewer
	// closeStore closes the BoltDB store, or leaves the cluster.
	closeStore func() error
	// notifier delivers stack events; nil without --notify-* URLs.
	notifier *notify.Webhook
	// access is the roles file and sign-in, and the audit trail.
	access *accessSetup
	// stopPolicies ends the watch or the polling of the --policy source.
	stopPolicies func()
	// fleet is the StackSets' generators and rollouts.
	fleet *fleetWiring
}

// start wires the packages together and starts them.
func start(ctx context.Context, f *runFlags, log *slog.Logger) (_ *app, err error) {
	red := scrub.NewRedactor(f.daemonSecrets()...) // every secret the daemon knows, scrubbed everywhere
	log = scrub.Logger(log, red)
	srcs, err := f.sources()
	if err != nil {
		return nil, err
	}
	auth, err := f.auth()
	if err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(f.dataDir)
	if err != nil {
		return nil, err
	}
	if err := f.checkSandboxGrants(dataDir); err != nil {
		return nil, err
	}
	hosts, err := f.hostPaths(srcs, dataDir)
	if err != nil {
		return nil, err
	}
	if err := checkLocalConfig(srcs, hosts, log); err != nil {
		return nil, err
	}
	if err := f.clusterFlags.check(f.backend, f.secretsPassphraseFile); err != nil {
		return nil, err
	}
	https, err := f.tlsFlags.load(f.advertise, f.sandboxFlags.grants, log)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	st, own, closeStore, err := openStore(ctx, f, dataDir, log)
	if err != nil {
		return nil, err
	}
	closeStore = f.auditFlags.pruneAudit(st, closeStore, log)
	defer func() {
		if err != nil {
			closeStore()
		}
	}()
	token, err := f.apiToken(dataDir, log)
	if err != nil {
		return nil, err
	}
	hookSecret, err := readSecretFile(f.webhookFile, "--webhook-secret-file")
	if err != nil {
		return nil, err
	}
	red.Add(token, hookSecret)
	acc, err := f.newAccess(ctx, token, st, nodeName(own), dataDir, red, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			acc.close()
		}
	}()
	wh, err := newWebhookNotifier(f, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			closeNotifier(wh, 0)
		}
	}()
	reg := prometheus.NewRegistry()
	metricSet := metrics.New(reg, nil, version)
	pols, err := openPolicies(f, auth, dataDir, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			pols.stop()
		}
	}()
	pol := pols.policies
	iss, err := f.oidcFlags.issuer(ctx, dataDir, own, log)
	if err != nil {
		return nil, err
	}
	fl := newFleet(st, own, asNotifier(wh), log)
	d, run, fetcher, err := newDaemon(ctx, f, srcs, auth, dataDir, hosts, st, own, metricSet, asNotifier(wh), red, log, pol, iss, fl)
	if err != nil {
		return nil, err
	}
	pv, err := newPreviewer(f, d, own, run, fetcher, st, auth, dataDir, metricSet, asNotifier(wh), log, pol)
	if err != nil {
		return nil, err
	}
	metricSet.SetAPI(d)
	if pv != nil {
		metricSet.SetPullRequests(pv.PullRequests)
	}
	registerSandboxMetric(reg, f.sandboxWarn == "", f.reaper)
	registerOIDCMetrics(reg, iss)
	reg.MustRegister(fleetCollector{fleetAPI{fl, d}})
	if f.adoptOrphans {
		adoptOrphans(log)
	}
	if err := d.Start(ctx); err != nil {
		return nil, err
	}
	fl.run(d, f.pollInterval)
	defer func() {
		if err != nil {
			fl.close()
		}
	}()
	if pv != nil {
		if err := pv.Start(); err != nil {
			_ = d.Stop(context.Background())
			return nil, err
		}
	}
	srv := web.New(https.webOptions(acc.webOptions(web.Options{Addr: f.listen, API: pols.api(d), Logger: log.With("component", "web"), Registry: reg, Metrics: metricSet,
		Version: version, Token: token, ReadRequiresToken: f.readToken, WebhookSecret: hookSecret,
		AllowedHosts: allowedHosts(f), Previews: previewAPI(pv), StackSets: fleetAPI{fl, d}, Issuer: webIssuer(iss), Warnings: append(apiWarnings(f), nonEmpty(f.sandboxWarn)...)})))
	for _, w := range srv.Warnings() {
		log.Warn(w)
	}
	if err := srv.Start(); err != nil {
		_ = d.Stop(context.Background())
		return nil, listenError(err, f.listen)
	}
	if err := recordAPIURL(dataDir, listenURL(srv.Addr(), f.tlsCertFile != "")); err != nil {
		_ = srv.Stop(context.Background())
		_ = d.Stop(context.Background())
		return nil, err
	}
	log.Info("stackd started", "version", version, "config", f.config.String(), "data_dir", dataDir, "stacks", len(d.Stacks()))
	return &app{srv: srv, d: d, previews: pv, closeStore: closeStore, notifier: wh, access: acc, stopPolicies: pols.stop, fleet: fl}, nil
}

// readEnvFiles reads --env-file files: NAME=value lines, blank lines and
// # comments skipped. An error names the file and line, never a value.
func readEnvFiles(files []string) ([]string, error) {
	var env []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--env-file: %w", err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
			if !ok || !envVarName.MatchString(name) {
				return nil, fmt.Errorf("--env-file %s:%d: want NAME=value", file, i+1)
			}
			env = append(env, name+"="+value)
		}
	}
	return env, nil
}

// envVarName is a valid environment variable name.
var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// allowedHosts are the --allowed-host names, and the host of this
// replica's --advertise-url, which the other replicas use.
func allowedHosts(f *runFlags) []string {
	hosts := slices.Clone([]string(f.allowedHosts))
	for _, raw := range []string{f.advertise, f.idIssuerURL} {
		if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
			hosts = append(hosts, u.Hostname())
		}
	}
	return hosts
}

// openStore opens the BoltDB store in the data dir, or in cluster mode
// joins the cluster, whose etcd keeps the state and says which stacks
// this replica holds (own is nil for a single node).
func openStore(ctx context.Context, f *runFlags, dataDir string, log *slog.Logger) (daemon.Store, daemon.Ownership, func() error, error) {
	if f.clusterFlags.enabled() {
		c, err := f.clusterFlags.open(ctx, log)
		if err != nil {
			return nil, nil, nil, err
		}
		return c, c, c.Close, nil
	}
	st, err := store.Open(filepath.Join(dataDir, store.FileName), store.Options{})
	if err != nil {
		return nil, nil, nil, err
	}
	return st, nil, st.Close, nil
}

// newWebhookNotifier returns the notifier of the --notify-* flags; nil
// when no URL is given.
func newWebhookNotifier(f *runFlags, log *slog.Logger) (*notify.Webhook, error) {
	urls, err := webhookURLs(f.notifyURLs, f.notifyURLFiles, "--notify-url")
	if err != nil {
		return nil, err
	}
	slack, err := webhookURLs(f.notifySlack, f.notifySlackFiles, "--notify-slack-url")
	if err != nil {
		return nil, err
	}
	if len(urls) == 0 && len(slack) == 0 {
		return nil, nil
	}
	secret, err := readSecretFile(f.notifySecret, "--notify-secret-file")
	if err != nil {
		return nil, err
	}
	return notify.NewWebhook(notify.Options{URLs: urls, SlackURLs: slack,
		Secret: secret, Logger: log.With("component", "notify")}), nil
}

// webhookURLs are the URLs given as flags and those read from files (a
// webhook URL is a secret: a file keeps it out of argv), each checked.
func webhookURLs(urls, files []string, flagName string) ([]string, error) {
	out := slices.Clone(urls)
	for _, file := range files {
		u, err := readSecretFile(file, flagName+"-file")
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	for _, u := range out {
		if err := notify.CheckWebhookURL(u); err != nil {
			return nil, fmt.Errorf("%s: %w", flagName, err)
		}
	}
	return out, nil
}

// asNotifier is wh as a daemon.Notifier; nil, not a nil pointer, when
// there is none.
func asNotifier(wh *notify.Webhook) daemon.Notifier {
	if wh == nil {
		return nil
	}
	return wh
}

// closeNotifier flushes wh's queued events for at most grace, then stops
// it. Undelivered events are logged by wh itself.
func closeNotifier(wh *notify.Webhook, grace time.Duration) {
	if wh == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = wh.Close(ctx)
}

func newDaemon(ctx context.Context, f *runFlags, srcs []spec.Source, auth *model.GitAuth, dataDir string, hosts spec.HostPaths, st daemon.Store,
	own daemon.Ownership, obs daemon.Observer, notifier daemon.Notifier, red *scrub.Redactor, log *slog.Logger, pol gate.Policies,
	iss *identity.Issuer, fl *fleetWiring,
) (*daemon.Daemon, daemon.Runner, daemon.Fetcher, error) {
	if f.pulumiGOGC < 0 {
		return nil, nil, nil, usageErrorf("run: --pulumi-gogc %d: must not be negative (0 leaves Go's default)", f.pulumiGOGC)
	}
	bin, err := pulumiBin(f.pulumiBin)
	if err != nil {
		return nil, nil, nil, err
	}
	env, err := readEnvFiles(f.envFiles)
	if err != nil {
		return nil, nil, nil, err
	}
	sb, err := newSandbox(&f.sandboxFlags, log)
	if err != nil {
		return nil, nil, nil, err
	}
	run, err := runner.New(ctx, runner.Options{Bin: bin, DataDir: dataDir, DefaultBackend: f.backend,
		PassphraseFile: f.secretsPassphraseFile, Timeout: f.opTimeout, Logger: log.With("component", "runner"),
		PassEnv: f.passEnv, Env: env, InstallTimeout: f.installTimeout, Sandbox: sb, ProjectPlugins: f.projectPlugins,
		EngineGOGC: f.pulumiGOGC,
		Watchdog:   sandbox.Watchdog{}, Heartbeat: f.heartbeat(), Reaper: f.reaper,
		Secrets: func(v ...string) { red.Add(v...) }, Claims: pulumiClaims(own), Identity: runnerIdentity(iss)})
	if err != nil {
		return nil, nil, nil, err
	}
	approval, err := spec.ParseApproval(f.approval)
	if err != nil {
		return nil, nil, nil, err
	}
	fetcher := gitwatch.New(f.withLimits(gitwatch.Options{Timeout: f.gitTimeout, CacheFor: f.minResync / 2,
		RemoteCall: remoteCall(obs), Logger: log.With("component", "gitwatch")}))
	refs := spec.RefSources{SecretsDir: f.secretsDir, ConfigMapsDir: f.configMapsDir, EnvAllow: f.envRefAllow}
	expand, rollouts := fl.attach(fleet.Options{Git: fetcher, Dir: filepath.Join(dataDir, "stacksets"), Timeout: f.gitTimeout,
		Auth: fleet.RefAuth(refs), HostPaths: hosts})
	d, err := daemon.New(nil, daemon.Options{
		Store: st, Runner: run, Logger: log.With("component", "daemon"), DataDir: dataDir,
		Fetcher:       fetcher,
		Refs:          refs,
		HostPaths:     hosts,
		MaxConcurrent: f.maxConcurrent, MinResync: f.minResync, MaxFailures: f.maxFailures,
		BackoffBase: f.retryBackoff, OpTimeout: f.opTimeout,
		Sources: srcs, SourceAuth: auth, SourcePoll: f.pollInterval, Observer: obs, WatchConfig: f.watchConfig, AllowMassRemoval: f.massRemoval,
		DriftInterval: f.driftInterval, Notifier: notifier, Approval: approval,
		Ownership: own, Node: nodeName(own), HandoverGrace: f.handover, Redactor: red, Policies: pol,
		Expand: expand, Rollouts: rollouts,
	})
	return d, run, fetcher, err
}

// checkLocalConfig validates a config made of local files only, with the
// rules hosts on the paths it may name, logging each problem, so that a
// broken config stops the start with its file:line:column list. A config
// with Git sources is checked by the daemon, which starts anyway and
// waits for a valid commit.
func checkLocalConfig(srcs []spec.Source, hosts spec.HostPaths, log *slog.Logger) error {
	paths := localPaths(srcs)
	if len(paths) < len(srcs) {
		return nil
	}
	_, diags, err := spec.LoadInputsExpanding(localInputs(srcs, hosts), offlineExpander(hosts))
	if err != nil {
		for _, d := range diags {
			log.Error("config", "problem", d.String())
		}
		return fmt.Errorf("config %s is not valid", strings.Join(paths, ", "))
	}
	return nil
}

// readSecretFile reads a token or secret from a file, trimmed; "" when
// no file is given. An empty file is an error: it would turn the check
// off silently.
func readSecretFile(path, flagName string) (string, error) {
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flagName, err)
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", flagName, path)
	}
	return s, nil
}

// stop stops the daemon in order: HTTP turns read-only (writes get 503,
// health says "stopping"), then operations (drained until grace ends,
// then interrupted and recorded), then HTTP, then the notifier (its
// queue flushed for up to notifyGrace), then the store (in a cluster:
// this replica leaves it, and the others take its stacks at once).
func (a *app) stop(grace context.Context) error {
	// Reads are answered until the running operations end, so that an
	// operator sees what the stop waits for; writes are refused. The
	// daemon says it stops before the server does, so that /healthz
	// never says "stopping" without the operations it waits for.
	a.d.Stopping()
	a.srv.Drain()
	var errPreviews error
	if a.previews != nil {
		errPreviews = a.previews.Stop(grace) // previews are cancelled, not drained
	}
	errDaemon := a.d.Stop(grace)
	a.fleet.close()
	if a.stopPolicies != nil {
		a.stopPolicies()
	}
	httpCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errHTTP := a.srv.Stop(httpCtx)
	closeNotifier(a.notifier, notifyGrace)
	a.access.close()
	return errors.Join(errHTTP, errPreviews, errDaemon, a.closeStore())
}

// pulumiBin finds the directory of the pulumi CLI: the flag, else beside
// the stackd executable, else on PATH.
func pulumiBin(flagValue string) (string, error) {
	if flagValue != "" {
		return filepath.Abs(flagValue)
	}
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		if _, err := os.Stat(filepath.Join(dir, "pulumi")); err == nil {
			return dir, nil
		}
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, "pulumi")); err == nil && strings.TrimSpace(dir) != "" {
			return filepath.Abs(dir)
		}
	}
	return "", errors.New("pulumi CLI not found: set --pulumi-bin, or put pulumi beside stackd or on PATH")
}

// remoteCall is the gitwatch hook that counts remote calls in obs's
// metrics, when obs keeps them.
func remoteCall(obs daemon.Observer) func(op string) {
	if m, ok := obs.(interface{ RemoteCall(op string) }); ok {
		return m.RemoteCall
	}
	return nil
}

// defaultConcurrency is --max-concurrent's default: an operation is
// mostly the CPU of its pulumi, language host and providers, so one per
// core, and never fewer than two (one slow update must not hold every
// other stack back).
func defaultConcurrency() int { return max(daemon.DefaultMaxConcurrent, runtime.NumCPU()) }
