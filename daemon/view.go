package daemon

import (
	"errors"
	"reflect"
	"strings"
	"time"
	"unicode"
)

// ErrUnknownStack is returned for a name that is not a stack of the
// daemon.
var ErrUnknownStack = errors.New("unknown stack")

// StackView is a stack as the API shows it: its spec with secrets
// redacted, and its PKO-shaped status.
type StackView struct {
	Name string `json:"name"`
	// Spec is nil for a stack that left the config.
	Spec    map[string]any `json:"spec,omitempty"`
	Status  StackStatus    `json:"status"`
	Removed bool           `json:"removed,omitempty"`
	// ExternalLink is the stack's external-link annotation.
	ExternalLink string `json:"externalLink,omitempty"`
	// LastSuccess is when an update last succeeded.
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	// Tracking is the branch, commit or Program the stack follows.
	Tracking string `json:"tracking,omitempty"`
	// Source is the config source that defines the stack (a --config
	// value); empty once the stack left the config.
	Source string `json:"source,omitempty"`
}

// Stacks lists every stack, by name.
func (d *Daemon) Stacks() []StackView {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]StackView, 0, len(d.stacks))
	for _, name := range sortedKeys(d.stacks) {
		out = append(out, d.viewLocked(d.stacks[name]))
	}
	return out
}

// Stack returns one stack, or ErrUnknownStack.
func (d *Daemon) Stack(name string) (StackView, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.stacks[name]
	if st == nil {
		return StackView{}, ErrUnknownStack
	}
	return d.viewLocked(st), nil
}

func (d *Daemon) viewLocked(st *stackState) StackView {
	v := StackView{Name: st.rec.Name, Status: st.rec.Status.Clone(), Removed: st.rec.Removed, LastSuccess: st.rec.LastSuccess}
	v.Status.Health = healthPtr(HealthOf(&st.rec.Status, st.rec.Generation))
	if st.stack != nil {
		v.Spec = RedactedSpec(&st.stack.Spec)
		v.ExternalLink = st.stack.ExternalLink()
		v.Tracking = tracking(&st.stack.Spec)
		v.Source = st.stack.Source
	}
	return v
}

// Sync asks for a run of the named stack, as PKO's reconcile-request
// annotation does, and returns the request's token. For a stack that left
// the config and whose destroy stalled, it asks for another destroy.
func (d *Daemon) Sync(name string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.stacks[name]
	if st == nil {
		return "", ErrUnknownStack
	}
	token := time.Now().UTC().Format(time.RFC3339Nano)
	st.rec.SyncRequest = token
	st.blocked = false
	if tracksBranch(st) {
		st.nextPoll = time.Time{} // a sync looks at the branch again
		if src, err := d.gitSource(st.stack); err == nil {
			d.opts.Fetcher.Forget(src.URL)
		}
	}
	d.putStack(st)
	d.kick()
	return token, nil
}

// Ready is nil once the daemon has started.
func (d *Daemon) Ready() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case !d.started:
		return errors.New("starting")
	case d.cfg == nil:
		return errors.New("no config applied yet: " + d.reload.Error)
	}
	return nil
}

// LiveLog returns the log of the named stack's running operation, or nil.
func (d *Daemon) LiveLog(name string) *LiveLog {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.stacks[name]; st != nil && st.running {
		return st.live
	}
	return nil
}

// secretFields are the spec fields whose literal values may be secrets.
var secretFields = []string{"secretsRef", "envRefs", "gitAuth"}

// RedactedSpec renders spec with PKO's field names, leaving out unset
// fields, with every literal value that may be a secret replaced by
// "[secret]".
func RedactedSpec(spec *StackSpec) map[string]any {
	m, _ := plain(*spec).(map[string]any)
	for _, f := range secretFields {
		if v, ok := m[f]; ok {
			m[f] = redactLiterals(v)
		}
	}
	if s, ok := m["secrets"].(map[string]any); ok {
		for k := range s {
			s[k] = "[secret]"
		}
	}
	return m
}

// redactLiterals replaces the value of every literal reference below v.
func redactLiterals(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if k == "literal" {
				t[k] = map[string]any{"value": "[secret]"}
				continue
			}
			t[k] = redactLiterals(e)
		}
	case []any:
		for i, e := range t {
			t[i] = redactLiterals(e)
		}
	}
	return v
}

// plain turns a config value into maps, slices and scalars named by the
// fields' yaml tags, leaving out unset struct fields and Kubernetes-only
// ones. Values the user wrote as free-form YAML are kept as they are.
func plain(v any) any {
	return plainValue(reflect.ValueOf(v), false)
}

var (
	ignoredType  = reflect.TypeOf(Ignored{})
	durationType = reflect.TypeOf(Duration{})
)

func plainValue(v reflect.Value, omitZero bool) any {
	if !v.IsValid() {
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return plainValue(v.Elem(), false)
	case reflect.Struct:
		return plainStruct(v)
	case reflect.Map:
		if v.Len() == 0 {
			return nil
		}
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[it.Key().String()] = plainValue(it.Value(), false)
		}
		return out
	case reflect.Slice:
		if v.Len() == 0 {
			return nil
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = plainValue(v.Index(i), false)
		}
		return out
	}
	if omitZero && v.IsZero() {
		return nil
	}
	return v.Interface()
}

func plainStruct(v reflect.Value) any {
	switch v.Type() {
	case ignoredType:
		return nil
	case durationType:
		if d := v.Interface().(Duration); d.Duration != 0 {
			return d.String()
		}
		return nil
	}
	out := map[string]any{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		if e := plainValue(v.Field(i), true); e != nil {
			out[fieldName(f)] = e
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// fieldName is a field's yaml name, or its Go name with a lowercase
// first letter.
func fieldName(f reflect.StructField) string {
	if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" {
		return name
	}
	r := []rune(f.Name)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

// tracking names what a stack follows: "<repo>@<branch>", "<repo>@<commit>"
// or "program <name>".
func tracking(spec *StackSpec) string {
	switch {
	case spec.ProgramRef != nil:
		return "program " + spec.ProgramRef.Name
	case spec.Branch != "":
		return spec.ProjectRepo + "@" + spec.Branch
	}
	return spec.ProjectRepo + "@" + spec.Commit
}
