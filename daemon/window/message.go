package window

import (
	"fmt"
	"strings"

	"github.com/stackd/stackd/daemon/spec"
)

// Message says what waits, until when (in the time zone of the
// first window), and for which windows: the time comes first, so that
// a shortened message still says it.
func Message(change string, v Verdict) string {
	windows := strings.Join(v.Names(), ", ")
	if v.Until().IsZero() {
		return fmt.Sprintf("the %s waits for %s; no window opens within a year", changeNoun(change), windows)
	}
	return fmt.Sprintf("the %s waits until %s for %s", changeNoun(change), v.Until().Format(spec.WindowTimeLayout), windows)
}

func changeNoun(change string) string {
	switch change {
	case spec.ChangeDrift:
		return "drift remediation"
	case spec.ChangeDestroy:
		return "destroy"
	}
	return "change"
}
